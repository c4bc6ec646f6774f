-- Internal: a channel that message_dequeue visited, as it read the row, and
-- what its takes got from it; _channel_place decides from this where the
-- channel goes next.  One value per channel, rather than one array per
-- field, so that the dequeue's bookkeeping and the placing read alike.
CREATE TYPE @extschema@._channel_visit AS (
    channel @extschema@.channel,
    -- The dequeue locked the row: the channel has limits, or it moves.
    is_held boolean,
    -- How many more it may give (its free places; one with a release
    -- interval); 0 once it dropped out of the sharing.
    cap integer,
    num_taken integer,
    -- Of them, new locks (not recovered expired ones).
    num_fresh integer,
    -- Expired locks that used up max_attempts, moved to the dead letters.
    num_dead integer,
    -- The dequeue_at of the first message taken, as it was.
    first_at bigint,
    -- The channel's floor as the takes read it.
    floor_at bigint,
    -- Its last take gave less than was asked.
    came_short boolean
);

COMMENT ON TYPE @extschema@._channel_visit IS
'Internal: a channel visited by message_dequeue and what its takes got from it.';

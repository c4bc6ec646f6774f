"""Notifications with real connections: LISTEN lonnymq gets one notification
per transaction and channel, with the channel name (or its id, or nothing)
as payload, only for channels with notify.
"""

from __future__ import annotations

from lonnymq_dev.calls import dequeue_one


def test_notifications_one_per_transaction_and_channel(db):
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('loud', p_notify => true)")
    admin.execute("SELECT lonnymq.channel_set('quiet')")
    listener = db.connect()
    listener.execute("LISTEN lonnymq")
    producer = db.connect(autocommit=False)
    for _ in range(5):
        producer.execute("SELECT lonnymq.message_create('loud', 'x')")
    producer.execute("SELECT lonnymq.message_create_batch('loud', ARRAY['a', 'b']::bytea[])")
    producer.execute("SELECT lonnymq.message_create('quiet', 'x')")
    producer.execute("SELECT lonnymq.message_create('loud', 'later', lonnymq.to_epoch(now()) + 3600000)")
    producer.commit()
    got = [(n.channel, n.payload) for n in listener.notifies(timeout=1.0)]
    assert got == [("lonnymq", "loud")]
    # A future-dated message alone notifies nothing; a defer to now does.
    producer.execute("SELECT lonnymq.message_create('loud', 'later', lonnymq.to_epoch(now()) + 3600000)")
    producer.commit()
    assert list(listener.notifies(timeout=0.5)) == []
    mid, token = dequeue_one(admin, channel="loud")
    admin.execute("SELECT lonnymq.message_defer(%s, %s)", (mid, token))
    assert [n.payload for n in listener.notifies(timeout=1.0)] == ["loud"]
    # Nothing is sent for a transaction that rolls back.
    producer.execute("SELECT lonnymq.message_create('loud', 'x')")
    producer.rollback()
    assert list(listener.notifies(timeout=0.5)) == []


def test_notification_payload_can_hide_the_channel_name(db):
    """0.9.0: PostgreSQL has no access control on LISTEN, so a role with no
    grants receives every payload; a channel may send its id or nothing
    instead of its name, on create, defer and resume alike."""
    admin = db.connect()
    admin.execute("SELECT lonnymq.channel_set('secret-customer-acme', p_notify => true, p_notify_payload => 'id')")
    admin.execute("SELECT lonnymq.channel_set('secret-customer-globex', p_notify => true, p_notify_payload => 'none')")
    admin.execute("SELECT lonnymq.channel_set('public-news', p_notify => true)")
    acme_id = admin.execute("SELECT id FROM lonnymq.channel WHERE name = 'secret-customer-acme'").fetchone()[0]
    listener = db.connect()
    listener.execute("LISTEN lonnymq")
    for channel in ("secret-customer-acme", "secret-customer-globex", "public-news"):
        admin.execute("SELECT lonnymq.message_create(%s, 'x')", (channel,))
    got = sorted(n.payload for n in listener.notifies(timeout=1.0, stop_after=3))
    assert got == sorted([str(acme_id), "", "public-news"])
    mid, token = dequeue_one(admin, channel="secret-customer-acme")
    admin.execute("SELECT lonnymq.message_defer(%s, %s)", (mid, token))
    admin.execute("SELECT lonnymq.channel_pause('secret-customer-globex')")
    admin.execute("SELECT lonnymq.channel_resume('secret-customer-globex')")
    got = sorted(n.payload for n in listener.notifies(timeout=1.0, stop_after=2))
    assert got == sorted([str(acme_id), ""])
    assert not any("secret" in n.payload for n in listener.notifies(timeout=0.3))

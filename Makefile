# lonnymq -- PostgreSQL message queue, a pure SQL / PL/pgSQL extension built with PGXS.
#
# Main targets (each does its own setup, so they work on a fresh Debian machine):
#   make               build sql/lonnymq--$(EXTVERSION).sql from sql/src/ (sql/src/MANIFEST.md), after check-version
#   make deps          install the Debian packages (apt, as root or via sudo) and the .venv
#   make lint          sqlfluff over sql/src/, the manifest (tools/manifest.py), every function's
#                      header against its body (tools/headers.py), the dequeue's size
#                      (tools/dequeue_size.py); make lint-tests: relaxed rules over test/pgtap/
#   make test          deps + build + install (as root/sudo) + lint + pytest (pgTAP files and
#                      Python integration tests on a throwaway cluster); PYTEST_ARGS is passed on.
#                      On Debian's PostgreSQL 15; `make test PG=18` on another major (14 to 18)
#   make demo          deps + build + install + demo/demo.py
#   make server        deps + build + install + a throwaway server with a database shop, for the
#                      README's tour (prints the PGHOST/PGPORT/... line to paste; Ctrl-C ends it)
#   make bench         deps + build + install + bench/run.py (benchmarks, bench/results/)
#   make install       PGXS install into `$(PG_CONFIG) --sharedir`/extension (needs write access)
#   make installcheck  pg_prove test/pgtap/*.sql and the isolation specs (test/isolation/) against an
#                      already running server (see below)
#   make dist          lonnymq-$(EXTVERSION).zip, a PGXN distribution of the committed HEAD
#   make check-version control default_version, META.json and CHANGELOG.md must agree

EXTENSION = lonnymq

# Python that creates .venv and runs tools/ (stdlib only). Not called
# PYTHON: PGXS (Makefile.global) sets that one to the python PostgreSQL was built with.
PY3 ?= python3
CONTROL   = $(EXTENSION).control

# The version comes only from the control file's default_version.
EXTVERSION := $(shell sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" $(CONTROL))
ifeq ($(strip $(EXTVERSION)),)
$(error cannot read default_version from $(CONTROL))
endif

# The scripts, as PostgreSQL's own extensions ship them (sql/README.md):
#  - the install script of the CURRENT version, sql/lonnymq--$(EXTVERSION).sql, generated
#    from the sources sql/src/<group>/<object>.sql in the order of sql/src/MANIFEST.md,
#    which lists every one of them under the group of what it does (tools/manifest.py
#    refuses a file it does not list once); not committed;
#  - one committed base install script, sql/lonnymq--0.1.0.sql, and committed upgrade
#    scripts sql/lonnymq--A--B.sql that hold only what changed: every released version
#    is installed from the base through them (CREATE EXTENSION ... VERSION 'X'), exactly
#    as it was released (test/python/test_upgrade_released.py).
SQL_SOURCES := $(shell $(PY3) tools/manifest.py files 2>/dev/null)
BUILT_SQL   := sql/$(EXTENSION)--$(EXTVERSION).sql

# Upgrade scripts TO the current version, sql/lonnymq--A--$(EXTVERSION).sql, are built
# from sql/upgrade/A--$(EXTVERSION).sql (the hand-written schema changes) plus the
# functions of sql/src/ that A does not already define so (tools/build_upgrade.py), and
# committed. Older upgrade scripts are frozen.
UPGRADE_HEADS := $(wildcard sql/upgrade/*--$(EXTVERSION).sql)
BUILT_UPGRADES := $(patsubst sql/upgrade/%.sql,sql/$(EXTENSION)--%.sql,$(UPGRADE_HEADS))

# Installed files: the built script, the base and every upgrade script ($(sort) removes
# duplicates). Not an install script that an older checkout built and left.
DATA = $(sort $(BUILT_SQL) $(BUILT_UPGRADES) sql/$(EXTENSION)--0.1.0.sql $(wildcard sql/$(EXTENSION)--*--*.sql))

# No pg_regress tests: our own installcheck below replaces the PGXS one.
REGRESS =
NO_INSTALLCHECK = 1

VENV   := .venv
VENV_PY := $(VENV)/bin/python
SQLFLUFF := $(VENV)/bin/sqlfluff
PYTEST_ARGS ?=
# openjdk-17-jre-headless: Spark (pipeline/, its tests and the demo) runs on the JVM.
# prometheus-postgres-exporter: test/python/test_metrics.py scrapes monitoring/'s queries with it.
# libpostgresql-jdbc-java: PostgreSQL's JDBC driver (/usr/share/java/postgresql.jar), for Spark's
# JDBC reads (pipeline export, and the plain read it is measured against in bench/pipeline.py).
APT_PACKAGES = postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl openjdk-17-jre-headless prometheus-postgres-exporter libpostgresql-jdbc-java
PGTAP_FILES := $(shell LC_ALL=C ls -1 test/pgtap/*.sql 2>/dev/null | LC_ALL=C sort)

# Lint: sql/src with .sqlfluff as is. test/pgtap gets a relaxed rule set (capitalisation,
# and every file must parse) through `make lint-tests`: pgTAP assertions are written one per
# line, which the layout rules reject. Both run in `make lint` and so in `make test`
# (LINT_TESTS=0 skips the test files).
LINT_SRC_PATHS  ?= sql/src
LINT_TEST_PATHS ?= test/pgtap
LINT_TEST_RULES ?= CP01,CP02,CP03,CP04,CP05
LINT_TESTS ?= 1

# PG: the PostgreSQL major (14 to 18) to build, install and test against, e.g.
# `make test PG=18`. Unset: Debian's server (postgresql-15), whose pg_config is on PATH.
# Set: lonnymq_dev/pgservers.py gives that major's pg_config, Debian's for 15, else a
# pinned build it fetches once into a cache outside the repository (an unsupported
# major is refused here). Everything below follows PG_CONFIG: PGXS, install, the tests.
ifdef PG
PG_CONFIG := $(shell $(PY3) -m lonnymq_dev.pgservers pg-config '$(PG)' || echo FAILED)
ifeq ($(PG_CONFIG),FAILED)
$(error PG=$(PG): see the message above; the supported majors are: $(PY3) -m lonnymq_dev.pgservers list)
endif
endif
PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
# pg_config's absolute path, for sudo (whose PATH may differ).
PG_CONFIG_PATH := $(shell command -v $(PG_CONFIG) 2>/dev/null)
export PG_CONFIG

# First rule = default goal. PGXS adds its own prerequisites to `all`.
all: check-version $(BUILT_SQL) $(BUILT_UPGRADES) sql-only

# The scripts for managed services, made from the extension's scripts: SQL-only
# (no CREATE EXTENSION: sql/sql-only/lonnymq-X.sql and an upgrade lonnymq-A--B.sql
# per extension upgrade, tools/build_sql_only.py), and pg_tle's registration of every
# version (sql/pg_tle/lonnymq-pg_tle.sql, tools/build_pg_tle.py).
.PHONY: sql-only
sql-only: $(BUILT_SQL) $(BUILT_UPGRADES)
	@cd tools && $(PY3) build_sql_only.py ../sql/sql-only '$(EXTVERSION)'
	@cd tools && $(PY3) build_pg_tle.py ../sql/pg_tle/lonnymq-pg_tle.sql '$(EXTVERSION)'

.PHONY: all check-version deps deps-system venv lint lint-tests test demo bench install-system installcheck dist remove-stale-scripts FORCE

check-version:
	@$(PY3) tools/check_version.py '$(EXTVERSION)'

# Regenerated on every make (cheap), but only rewritten when the content changes, so
# that removed or renamed sources are noticed and an unchanged file keeps its mtime.
$(BUILT_SQL): FORCE
	@$(PY3) tools/manifest.py check
	@{ \
	  printf '%s\n' '-- Generated by make from sql/src/ in the order of sql/src/MANIFEST.md ($(EXTENSION) $(EXTVERSION)). Do not edit: edit sql/src/ and run make.'; \
	  printf '%s\n' '\echo Use "CREATE EXTENSION $(EXTENSION)" to load this file. \quit'; \
	  for f in $(SQL_SOURCES); do \
	    printf '\n-- ---- %s ----\n' "$$f"; \
	    cat "$$f"; \
	    if [ -n "$$(tail -c 1 "$$f")" ]; then echo; fi; \
	  done; \
	} > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; echo "built $@ from $(words $(SQL_SOURCES)) file(s) in sql/src/"; fi

sql/$(EXTENSION)--%--$(EXTVERSION).sql: sql/upgrade/%--$(EXTVERSION).sql FORCE
	@$(PY3) tools/build_upgrade.py '$<' '$@' '$(EXTENSION)'

FORCE:

# Install scripts of released versions that earlier packagings installed (a full
# sql/lonnymq--X.Y.Z.sql per release) would take precedence over the base and the
# upgrades: they go, so that an install runs what ships (the same objects: see DATA).
install: remove-stale-scripts
remove-stale-scripts:
	@extdir='$(DESTDIR)$(datadir)/extension'; keep=' $(notdir $(DATA)) '; \
	for f in "$$extdir"/$(EXTENSION)--*.sql; do \
	  [ -e "$$f" ] || continue; \
	  case "$$keep" in *" $${f##*/} "*) ;; *) rm -f "$$f"; echo "removed stale $$f";; esac; \
	done

# A PGXN distribution: the committed HEAD (git archive; .gitattributes leaves out
# bench/results), the built install script and the SQL-only scripts, which are not
# committed.
dist: all
	git archive --format=zip -o $(EXTENSION)-$(EXTVERSION).zip \
	  --prefix=$(EXTENSION)-$(EXTVERSION)/sql/ --add-file=$(BUILT_SQL) \
	  --prefix=$(EXTENSION)-$(EXTVERSION)/sql/sql-only/ $(addprefix --add-file=,$(sort $(wildcard sql/sql-only/*.sql))) \
	  --prefix=$(EXTENSION)-$(EXTVERSION)/sql/pg_tle/ --add-file=sql/pg_tle/lonnymq-pg_tle.sql \
	  --prefix=$(EXTENSION)-$(EXTVERSION)/ HEAD
	@echo "wrote $(EXTENSION)-$(EXTVERSION).zip"

ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
else
install uninstall:
	@echo "error: PGXS not found ('$(PG_CONFIG) --pgxs'); run 'make deps' first (or set PG_CONFIG)" >&2; exit 1
endif

# ---------------------------------------------------------------- setup

deps: deps-system venv

deps-system:
	@bash tools/install-system-deps.sh $(APT_PACKAGES)

venv: $(VENV)/.stamp

# Skipped while the stamp is newer than pyproject.toml.
$(VENV)/.stamp: pyproject.toml
	@echo "deps: creating $(VENV) and installing '.[dev]'"
	@test -x $(VENV_PY) || $(PY3) -m venv $(VENV)
	@$(VENV_PY) -m pip install -q --disable-pip-version-check --upgrade pip
	@$(VENV_PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

# `make install` into PG_CONFIG's server (Debian's, or the build PG names): directly
# when root or when the extension directory is writable, else through sudo. A fetched
# build also gets Debian's pgTAP files (the tests' CREATE EXTENSION pgtap).
install-system:
	@extdir="$$($(PG_CONFIG) --sharedir)/extension"; \
	if [ "$$(id -u)" -eq 0 ] || [ -w "$$extdir" ]; then \
	  $(MAKE) --no-print-directory install; \
	elif command -v sudo >/dev/null 2>&1; then \
	  sudo $(MAKE) --no-print-directory install PG_CONFIG='$(PG_CONFIG_PATH)'; \
	else \
	  echo "error: cannot write $$extdir: run 'make install' as root" >&2; exit 1; \
	fi
ifdef PG
	@$(PY3) -m lonnymq_dev.pgservers add-pgtap '$(PG)'
endif

# ---------------------------------------------------------------- checks

lint: venv
	@src="$(wildcard $(addsuffix /*/*.sql,$(LINT_SRC_PATHS)))"; \
	if [ -z "$$src" ]; then echo "error: nothing to lint in $(LINT_SRC_PATHS)" >&2; exit 1; fi
	@echo "lint: $(LINT_SRC_PATHS)"
	@$(SQLFLUFF) lint $(LINT_SRC_PATHS)
	@$(PY3) tools/manifest.py check
	@$(PY3) tools/headers.py
	@$(PY3) tools/dequeue_size.py --max 1152
	@$(PY3) tools/dequeue_size.py --take --max 394
ifeq ($(LINT_TESTS),1)
	@$(MAKE) --no-print-directory lint-tests
endif

lint-tests: venv
	@if [ -n "$(wildcard $(addsuffix /*.sql,$(LINT_TEST_PATHS)))" ]; then \
	  echo "lint: $(LINT_TEST_PATHS) (rules $(LINT_TEST_RULES))"; \
	  $(SQLFLUFF) lint --rules $(LINT_TEST_RULES) $(LINT_TEST_PATHS); \
	fi

# Everything CI runs (.ci/run). Sub-makes so that PGXS is picked up once deps installed it.
# The generated bad-input suite (test/python/test_bad_input_properties.py) tries a fixed
# set of examples; LONNYMQ_HYPOTHESIS_EXAMPLES (per function) and LONNYMQ_HYPOTHESIS_SEED
# (random, or an integer) run it longer or differently.
#
# `make test` runs the whole suite on Debian's 15, then the version matrix: on each
# of MATRIX_MAJORS, the tests whose answer may change with the server (MATRIX_TESTS:
# every pgTAP file, upgrades equal to fresh installs, concurrency, crashes and
# restarts, the bounded-probe plans, the install paths of a database owner without
# superuser; planners, catalogs and privilege rules change between majors).
# `make test PG=18` runs the whole suite on that one major instead.
MATRIX_MAJORS ?= 14 16 17 18
MATRIX_TESTS = test/python/test_pgtap.py test/python/test_upgrade.py test/python/test_upgrade_released.py \
  test/python/test_concurrency.py test/python/test_races.py test/python/test_isolation_levels.py \
  test/python/test_faults.py test/python/test_poison_messages.py test/python/test_plans.py \
  test/python/test_plan_shapes.py test/python/test_install_paths.py test/python/test_rollback_after_raise.py \
  test/python/test_isolation_specs.py
test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory install-system
	@$(MAKE) --no-print-directory lint
	$(VENV_PY) -m pytest test/python -q $(PYTEST_ARGS)
ifndef PG
	@$(MAKE) --no-print-directory -j$(MATRIX_JOBS) --output-sync=target test-matrix-all
endif

# The matrix's majors, MATRIX_JOBS at a time (each its own server, clusters and
# temporary directories; a major's output is printed whole when it ends): two
# at a time took 697 s for the four where one after the other took 1,209 s (CI,
# 2 cores): the matrix's tests wait on locks, sleeps and restarts as much as
# they compute.
MATRIX_JOBS ?= 2
.PHONY: test-matrix-all
test-matrix-all: $(addprefix test-matrix-,$(MATRIX_MAJORS))
test-matrix-%:
	@$(MAKE) --no-print-directory test-matrix PG=$*

# One major of the matrix (PG required): install into its server, run MATRIX_TESTS.
.PHONY: test-matrix
test-matrix:
	@if [ -z "$(PG)" ]; then echo "error: make test-matrix needs PG=<major>" >&2; exit 1; fi
	@$(MAKE) --no-print-directory install-system
	@echo "matrix: PostgreSQL $(PG) ($$($(PG_CONFIG) --version)): $(words $(MATRIX_TESTS)) test files"
	$(VENV_PY) -m pytest $(MATRIX_TESTS) -q $(PYTEST_ARGS)

# The long soak test (test/python/test_soak.py::test_soak_long, skipped by `make test`):
# LONNYMQ_SOAK_MESSAGES messages (default 500000), or LONNYMQ_SOAK_SECONDS of production.
# Same setup as `make test`, without lint; PYTEST_ARGS is passed on.
.PHONY: soak
soak:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory install-system
	LONNYMQ_SOAK=1 $(VENV_PY) -m pytest test/python/test_soak.py -q -s $(PYTEST_ARGS)

# A throwaway server for the README's tour (lonnymq_dev/server.py): lonnymq installed,
# a database shop, the `export PGHOST=... PGDATABASE=shop` line to paste; Ctrl-C
# stops and removes it. `make server PG=18` for another version.
.PHONY: server
server:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory install-system
	$(VENV_PY) -m lonnymq_dev.server

demo:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory install-system
	$(VENV_PY) demo/demo.py

# Benchmarks (bench/run.py): a private cluster, or PGHOST/PGPORT; writes
# bench/results/<date>.md and PNGs. BENCH_DURATION, BENCH_WARMUP, BENCH_CLIENTS,
# BENCH_SCENARIOS, BENCH_SETTINGS: see bench/README.md. Installs the '.[bench]'
# extra (matplotlib) into the venv; `make test` does not need it.  Then the
# topics' fan-out (bench/publish.py), one metrics scrape (bench/metrics.py), a
# held snapshot seen from one worker session (bench/held_session.py, ~5 min), and
# the Spark pipeline against direct loops and a plain JDBC read (bench/pipeline.py).
bench:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory install-system
	@$(VENV_PY) -m pip install -q --disable-pip-version-check -e '.[dev,bench]'
	$(VENV_PY) bench/run.py
	$(VENV_PY) -m bench.publish
	$(VENV_PY) -m bench.metrics
	$(VENV_PY) -m bench.held_session
	$(VENV_PY) -m bench.pipeline

# installcheck (replaces the PGXS pg_regress one): runs pg_prove over test/pgtap/*.sql
# against an EXISTING, running server that has this version installed (`make install`),
# connecting with the standard libpq environment: PGHOST, PGPORT, PGUSER, PGDATABASE
# (PGUSER must be a superuser). It first runs CREATE EXTENSION IF NOT EXISTS pgtap and
# lonnymq in that database and vacuums lonnymq's tables (test/pgtap/include/installcheck.psql). All files share the one database, unlike `make test`, which
# gives every file a fresh database cloned from a template on a throwaway cluster.
# Then the isolation specs (test/isolation/: races replayed as fixed interleavings) with
# PG_CONFIG's pg_isolation_regress, in a database of their own, ISOLATION_DB, dropped and
# created here (the specs drop and create the extension in it before every permutation),
# with the marks' invariant check of lonnymq_dev/invariants.py; the results and any
# diffs go to test/isolation/out/ (not output/: PostgreSQL 14's pg_regress takes an input/ or
# output/ directory there for .source files). PGDATABASE is only connected to, to create it.
ISOLATION_DB ?= lonnymq_isolation
PG_ISOLATION_REGRESS = $(dir $(PGXS))../test/isolation/pg_isolation_regress
installcheck:
	@if [ -z "$(PGTAP_FILES)" ]; then echo "error: no pgTAP files in test/pgtap/" >&2; exit 1; fi
	"$$($(PG_CONFIG) --bindir)/psql" -X -q -v ON_ERROR_STOP=1 -f test/pgtap/include/installcheck.psql
	pg_prove --psql-bin "$$($(PG_CONFIG) --bindir)/psql" -f $(PGTAP_FILES)
	"$$($(PG_CONFIG) --bindir)/psql" -X -q -v ON_ERROR_STOP=1 -c 'DROP DATABASE IF EXISTS $(ISOLATION_DB)' -c 'CREATE DATABASE $(ISOLATION_DB)'
	$(PY3) -m lonnymq_dev.invariants | "$$($(PG_CONFIG) --bindir)/psql" -X -q -v ON_ERROR_STOP=1 -d $(ISOLATION_DB)
	$(PG_ISOLATION_REGRESS) --use-existing --dbname=$(ISOLATION_DB) --inputdir=test/isolation \
	  --outputdir=test/isolation/out --schedule=test/isolation/schedule

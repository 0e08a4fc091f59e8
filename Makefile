# cosid: PGXS build of a C++17 extension, plus the GoogleTest unit tests of the pure core.
MODULE_big = cosid
EXTENSION = cosid
# SQL (sql/README.md): the released scripts in sql/ are frozen; the update script of the version
# being developed is built from its hand-written steps (sql/updates/) and the current
# definition of every function (sql/functions/, in the order below).
COSID_VERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" cosid.control)
# the version before it: from the name of its hand-written steps, sql/updates/PREVIOUS--VERSION.sql
COSID_PREVIOUS = $(patsubst sql/updates/%--$(COSID_VERSION).sql,%,$(wildcard sql/updates/*--$(COSID_VERSION).sql))
SQL_FUNCTIONS = $(addprefix sql/functions/,store.sql ids.sql namespace.sql tenants.sql lease.sql \
	history.sql fork.sql static.sql columns.sql observe.sql health.sql)
SQL_BUILT = sql/cosid--$(COSID_PREVIOUS)--$(COSID_VERSION).sql
DATA = $(filter-out $(SQL_BUILT),$(wildcard sql/cosid--*.sql))
DATA_built = $(SQL_BUILT)
PGFILEDESC = "cosid - leased-window Snowflake ids"

CORE_SRCS = $(wildcard src/core/*.cpp)
PG_SRCS = $(wildcard src/pg/*.cpp src/pg/*/*.cpp)
OBJS = $(CORE_SRCS:.cpp=.o) $(PG_SRCS:.cpp=.o)

# pg_regress inputs are test/sql/*.sql, their answers test/expected/*.out (beside the
# isolation specs' answers).
REGRESS = setup layout namespace next health store privileges clock layouts partition bind_defaults failover ids operations lease_pass regional forget_guard floor_bounds fork verify
REGRESS_OPTS = --inputdir=test --outputdir=test/out --temp-instance=test/tmp_check \
	--temp-config=test/regress.conf --load-extension=cosid
ISOLATION = $(basename $(notdir $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=test/out_isolation --temp-instance=test/tmp_check_iso \
	--temp-config=test/isolation.conf --load-extension=cosid

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
# Debian's PGXS would build LLVM bitcode with clang and without our C++17 flags.
override with_llvm = no
include $(PGXS)

# An install script that an older tree installed (cosid--1.6.sql, before sql/ held only
# cosid--1.0.sql and the update scripts) would stay beside the new ones, and CREATE EXTENSION
# prefers it to the chain: install removes every cosid--*.sql that DATA does not hold.
install: install-drop-stale
.PHONY: install-drop-stale
install-drop-stale:
	@for f in '$(DESTDIR)$(datadir)/$(datamoduledir)'/cosid--*.sql; do \
		case " $(notdir $(DATA) $(DATA_built)) " in *" $${f##*/} "*) ;; *) rm -f "$$f" ;; esac; \
	done

$(SQL_BUILT): sql/updates/$(COSID_PREVIOUS)--$(COSID_VERSION).sql $(SQL_FUNCTIONS) cosid.control
	{ echo '-- cosid $(COSID_PREVIOUS) -> $(COSID_VERSION).  Built by make from sql/updates/$(COSID_PREVIOUS)--$(COSID_VERSION).sql and'; \
	  echo '-- sql/functions/*.sql (sql/README.md): edit those, not this file.'; \
	  echo '\\echo Use "ALTER EXTENSION cosid UPDATE TO '"'"'$(COSID_VERSION)'"'"'" to load this file. \\quit'; \
	  for f in $(filter %.sql,$^); do echo; echo "-- >>> $$f"; cat "$$f"; done; } > $@

includedir_server := $(shell $(PG_CONFIG) --includedir-server)
override CXXFLAGS += -std=c++17 -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter
# The test command builds with COSID_WERROR=1: a warning on any major fails it.
ifdef COSID_WERROR
override CXXFLAGS += -Werror
endif
override CPPFLAGS := -Isrc/core -isystem $(includedir_server) -isystem $(shell $(PG_CONFIG) --includedir) \
	$(filter-out -I$(includedir_server),$(CPPFLAGS))
SHLIB_LINK += -lstdc++ -lpq
# PGXS tracks no header dependencies: rebuild every object when a header changes, so
# that no object keeps an old layout of a shared-memory struct.
$(OBJS): $(wildcard src/core/*.hpp src/pg/*.hpp src/pg/*/*.hpp)

# Unit tests: the core only, no PostgreSQL.  No -g: GoogleTest's failures name the file and
# line without it, and its debug information is a third of the build's CPU (a build with it
# for a debugger: make test/unit/run_unit UNIT_DEBUG=-g).
UNIT_SRCS = $(wildcard test/unit/*.cpp)
test/unit/run_unit: $(UNIT_SRCS) $(CORE_SRCS) $(wildcard src/core/*.hpp)
	g++ -std=c++17 -O1 $(UNIT_DEBUG) -Wall -Wextra -Isrc/core -o $@ $(UNIT_SRCS) $(CORE_SRCS) -lgtest -lgtest_main -pthread

.PHONY: unit
unit: test/unit/run_unit
	test/unit/run_unit

EXTRA_CLEAN = test/unit/run_unit test/model/run_model test/unit/run_unit_san test/unit/san test/model/run_model_san test/out test/out_isolation test/tmp_check test/tmp_check_iso

test/model/model_compare: test/model/model_compare.cpp $(CORE_SRCS) $(wildcard src/core/*.hpp)
	g++ -std=c++17 -O1 -g -Wall -Wextra -Isrc/core -o $@ test/model/model_compare.cpp $(CORE_SRCS)

# The exhaustive model checker over the core's rules (test/model/*.cpp but model_compare).
MODEL_SRCS = $(filter-out test/model/model_compare.cpp,$(wildcard test/model/*.cpp))
test/model/run_model: $(MODEL_SRCS) $(wildcard test/model/*.hpp) $(CORE_SRCS) $(wildcard src/core/*.hpp)
	g++ -std=c++17 -O2 -g -Wall -Wextra $(if $(COSID_WERROR),-Werror) -Isrc/core -o $@ $(MODEL_SRCS) $(CORE_SRCS) -pthread

# The same unit tests and model checker built with AddressSanitizer and
# UndefinedBehaviorSanitizer, stopping at the first report (scripts/static_checks.sh; the test
# command runs the unit tests from this build only).  -g1: line tables, enough for a report's
# stack (full debug information is a fifth of the build's CPU).  The unit tests at -O0: they
# run in seconds either way, and GoogleTest's macros at -O1 under the sanitizers cost 110 CPU-s
# to build against 43.
SAN_FLAGS = -std=c++17 -g1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -Wall -Wextra -Isrc/core
# (an object per source, in test/unit/san: make -j2 builds them on both cores)
UNIT_SAN_OBJS = $(patsubst test/unit/%.cpp,test/unit/san/%.o,$(UNIT_SRCS)) \
	$(patsubst src/core/%.cpp,test/unit/san/core_%.o,$(CORE_SRCS))
test/unit/san/%.o: test/unit/%.cpp $(wildcard src/core/*.hpp)
	@mkdir -p $(@D)
	g++ $(SAN_FLAGS) -O0 -c -o $@ $<
test/unit/san/core_%.o: src/core/%.cpp $(wildcard src/core/*.hpp)
	@mkdir -p $(@D)
	g++ $(SAN_FLAGS) -O0 -c -o $@ $<
test/unit/run_unit_san: $(UNIT_SAN_OBJS)
	g++ $(SAN_FLAGS) -O0 -o $@ $(UNIT_SAN_OBJS) -lgtest -lgtest_main -pthread
test/model/run_model_san: $(MODEL_SRCS) $(wildcard test/model/*.hpp) $(CORE_SRCS) $(wildcard src/core/*.hpp)
	g++ $(SAN_FLAGS) -O1 -o $@ $(MODEL_SRCS) $(CORE_SRCS) -pthread

# make dist: the release archive PGXN takes, a zip of the committed tree named after
# META.json's version (test/meta/check_meta.py checks that file).
DIST_VERSION = $(shell sed -n 's/^   "version": "\(.*\)",$$/\1/p' $(srcdir)/META.json | head -1)
.PHONY: dist
DIST_DIR ?= $(CURDIR)
dist:
	git -C $(srcdir) archive --format zip --prefix=cosid-$(DIST_VERSION)/ -o $(abspath $(DIST_DIR))/cosid-$(DIST_VERSION).zip HEAD

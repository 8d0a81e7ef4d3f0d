# rtlab: `make setup` installs what is missing, `make run` measures this machine,
# `make test` runs lint, type checks and the tests (real cyclictest and stress-ng).

# Debian 12's own Python (3.11.2) when there is one: what a stock bookworm host runs rtlab on
PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
# ... and the unit tests also on the newest Python this machine has (pyenv's), so a feature
# only one of the two has is found here, not by a user
NEWEST_PYTHON ?= $(shell ls -d "$$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.*/bin/python3 2>/dev/null | sort -V | tail -1)
VENV   ?= .venv
BIN    := $(VENV)/bin
DEB_PACKAGES := rt-tests stress-ng busybox dash python3-venv
# What the tests add: a browser for the HTML report, setpriv for the unprivileged case,
# QEMU for the guests that boot real RT and standard kernels, sshd for the SSH target,
# the 6.12 source, the riscv64 cross compiler and patch for the kernel builds, gcc for the
# busy loop the spike-cause tests inject into guests, LAVA's dispatcher (lava-run) for the
# board-farm tests; libelf-dev for the kcompile load (x86_64 defconfig builds objtool);
# GRUB's i386-pc images and tools and SeaBIOS for the x86_64 board that boots from its disk.
# xz, zstd and binutils' readelf unpack and read an x86 kernel as rtlab's own unpacking is checked.
TEST_DEB_PACKAGES := time chromium util-linux cpio qemu-system-x86 qemu-system-misc qemu-system-arm opensbi u-boot-qemu fdisk e2fsprogs grub-pc-bin grub-common seabios openssh-server openssh-client procps \
    linux-source-6.12 gcc-riscv64-linux-gnu gcc-aarch64-linux-gnu flex bison bc make patch xz-utils zstd binutils gcc libc6-dev libelf-dev lava-dispatcher
# LAVA's server for the board-farm test: its code unpacked, not installed (the package depends
# on systemd-sysv, and its postinst sets up a system database); what it runs on is Debian's.
LAVA_SERVER_DEB_PACKAGES := postgresql gunicorn python3-celery python3-defusedxml python3-django \
    python3-django-allauth python3-django-auth-ldap python3-django-environ python3-django-filters \
    python3-django-tables2 python3-djangorestframework python3-djangorestframework-extensions \
    python3-djangorestframework-filters python3-docutils python3-eventlet python3-junit.xml \
    python3-psycopg2 python3-simplejson python3-tap python3-voluptuous python3-whitenoise python3-zmq \
    python3-aiohttp python3-tz python3-jinja2 python3-requests
LAVA_SERVER := .cache/lava-server
# SQUAD (LKFT's result database) for the export test: pip's squad in a folder of its own
SQUAD := .cache/squad
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
RUN_ARGS ?= --duration 10s
# `make test-slow` runs what this leaves out: a full RT kernel build booted in QEMU (~10 min),
# the example studies whole. TESTS narrows the three parts of `make test` (a -m expression).
TESTS ?= not slow
# The groups that measure nothing and boot nothing (tests/conftest.py: PARALLEL_GROUPS) run on
# every CPU. The tests that measure or boot (host, guests, boards) check only what they
# started, so they pass beside another rtlab measuring, and the farms' tests judge what a farm
# does (takes a job, boots its guest, carries the run home), never how late a thread woke: two
# at a time, a file's tests on one worker (its runs made once) and the files that boot boards,
# the farms' too, on one worker, one after another: a riscv64 U-Boot board rebooted beside
# another board's boot once never came back (1 of 2 runs). A test marked ALONE judges what a
# neighbour changes (this machine's own share of the CPU; its quiet latency over a monitor's
# quiet blocks), or changes what a neighbour judges (SCHED_FIFO 99 on every CPU): it runs
# last, with the machine to itself.
PARALLEL := unit or hostile or tools
# ... beside the measuring part, not before it: two emulated guests leave about a seventh of the
# two CPUs idle (CI26: 3,754 CPU-seconds in 2,149 s), which the every-CPU part and the unit
# tests on the newest Python (1,100 CPU-seconds between them) take; their output is shown when
# the measuring part ends. Their own session (setsid: stopped as one group) is their own
# autogroup where the kernel has them, which shares the CPUs with make's as an equal whatever
# its tasks' nice, so the group's nice is set too. At an equal share (CI28) the measuring part
# took 2,580 s (2,149 s alone) and they ended 1,100 s before it; at nice 10 (a tenth of a CPU
# they contend for, CI29) 2,293 s, and they ended 220 s after it: 2,727 s in all, the best
# measured; at nice 5 (a quarter, CI30, with two short make test runs beside it for 3 minutes)
# the measuring part was 7 minutes behind CI29's by its middle.
BESIDE_NICE := 10
# ... and write their tests' files under folders of their own (pytest's --basetemp: emptied as
# each starts, kept after it for a failed test's files). In pytest's numbered folders
# (/tmp/pytest-of-USER) a session that ends later removes those of the sessions before it: the
# measuring part's end took 98 s more than its tests: removing the every-CPU part's 5 GB in
# 304,000 files, which `rm -rf` alone takes 40 s for here.
# One root a checkout, so two checkouts' runs leave each other's alone (two make test at once
# in one checkout would not: the second empties the first's).
BESIDE_TMP := $(or $(TMPDIR),/tmp)/rtlab-make-test-$(shell printf %s "$(CURDIR)" | cksum | cut -d' ' -f1)
# make itself, named so that `make -n test` prints the line that runs the tests rather than
# running it (make runs a line that names $(MAKE) even with -n)
SUBMAKE = $(MAKE) --no-print-directory
ALONE := alone
XDIST := -n auto --dist loadfile
# The measuring part's groups start heaviest first, by tests/durations.json (tests/heaviest_first.py);
# each whole run (TESTS as it is) writes its groups' seconds here, and `make test-durations`
# keeps them there.
TEST_TIMES := .cache/test-times.json
# pytest's 5 (no test selected: TESTS left a part empty) is no failure, unless every part says it
PYTEST_OK := ok() { [ "$$1" = 0 ] || [ "$$1" = 5 ]; }
# each part's wall time and the CPU time it and everything it started used (GNU time): the CPU
# seconds over this machine's CPUs are the shortest wall time the part could take here
TIMED = /usr/bin/time -f "make test, $(1): %e s wall, %U s user + %S s system CPU (%P of one CPU)"
# Python keeps the bytecode it compiles, whatever the environment says: with
# PYTHONDONTWRITEBYTECODE set (as some CI images have it), every rtlab a test starts compiled
# rtlab's modules again (0.47 s to start against 0.33 s) and every pytest process rewrote
# every test file (10 s to collect against 4.6 s). __pycache__ is ignored by git.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup test-setup apt-install run test test-fast test-newest test-slow test-durations lint bench clean

setup: $(BIN)/rtlab
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(DEB_PACKAGES)"

test-setup: setup
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(TEST_DEB_PACKAGES) $(LAVA_SERVER_DEB_PACKAGES)"
	@$(MAKE) --no-print-directory $(LAVA_SERVER)/usr/bin/lava-server
	@$(MAKE) --no-print-directory $(SQUAD)/bin/squad-admin

# the version that matches lava-dispatcher's lava-common, from the same apt lists
$(LAVA_SERVER)/usr/bin/lava-server:
	rm -rf $(LAVA_SERVER) && mkdir -p $(LAVA_SERVER)/deb
	cd $(LAVA_SERVER)/deb && { apt-get download -qq lava-server || \
	    { $(SUDO) apt-get update -qq && apt-get download -qq lava-server; }; }
	dpkg -x $(LAVA_SERVER)/deb/lava-server_*.deb $(LAVA_SERVER)

# Its web pages fetch their scripts from CDNs on first start (no network here): placeholders,
# marked fetched; the REST API the test uses needs none of them.
$(SQUAD)/bin/squad-admin:
	rm -rf $(SQUAD) && $(PYTHON) -m venv $(SQUAD)
	$(SQUAD)/bin/pip install -q 'squad>=1.90'
	cd $(SQUAD)/lib/python3*/site-packages/squad/frontend/static && : > download.status && \
	grep -v '^#' download.conf | while read -r dest url sum; do [ -n "$$dest" ] || continue; \
	    case "$$url" in *.js|*.css) mkdir -p "$$(dirname "$$dest")" && : > "$$dest" ;; *) mkdir -p "$$dest" ;; esac; \
	    echo "$$dest $$url $$sum" >> download.status; done

# A package counts as installed only when dpkg says "install ok installed": one left
# unpacked by an interrupted apt run is installed again (after dpkg --configure -a).
apt-install:
	@missing=""; for p in $(PACKAGES); do \
	    [ "$$(dpkg-query -W -f '$${Status}' $$p 2>/dev/null)" = "install ok installed" ] || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    $(SUDO) dpkg --configure -a; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The virtualenv is rebuilt only when the project's dependencies change.
$(BIN)/rtlab: pyproject.toml
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || \
	    { $(SUDO) apt-get update -qq && \
	      DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends python3-venv; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,labgrid]'
	@touch $@

run: setup
	$(BIN)/rtlab run $(RUN_ARGS)

lint: setup
	@$(MAKE) --no-print-directory apt-install PACKAGES=shellcheck
	shellcheck -s sh "$$($(BIN)/python -c 'from rtlab.agent import script_path; print(script_path())')" \
		src/rtlab/targets/qemu/init.sh  # the agent as shipped: its parts and generated constants
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

test: lint test-setup
	$(PYTEST_OK); mkdir -p .cache; beside=; log=$$(mktemp .cache/test-beside.XXXXXX) || exit 1; \
	failed=$$(mktemp .cache/test-failed.XXXXXX) || exit 1; export RTLAB_TEST_FAILURES="$$PWD/$$failed"; \
	trap 'kill -TERM -$$beside $$beside 2>/dev/null; rm -f "$$log" "$$failed"' EXIT; trap 'exit 1' HUP INT TERM; \
	echo "make test: what measures nothing runs beside what measures, at nice $(BESIDE_NICE); its output follows (until then in $$log)"; \
	BESIDE_M="($(TESTS)) and ($(PARALLEL))" setsid nice -n $(BESIDE_NICE) sh -c 'echo $(BESIDE_NICE) > /proc/self/autogroup 2>/dev/null; \
	    mkdir -p $(BESIDE_TMP); $(call TIMED,every CPU) $(BIN)/pytest -q --durations=30 $(XDIST) -p no:cacheprovider \
	        --basetemp=$(BESIDE_TMP)/every-cpu -m "$$BESIDE_M"; \
	    first=$$?; $(SUBMAKE) test-newest || exit 1; exit $$first' > "$$log" 2>&1 & beside=$$!; \
	RTLAB_TEST_TIMES=$(if $(subst not slow,,$(TESTS)),,$(TEST_TIMES)) $(call TIMED,two at a time) $(BIN)/pytest -q --durations=30 \
	    -n 2 --dist loadgroup --no-loadscope-reorder -m "($(TESTS)) and not ($(PARALLEL) or $(ALONE))"; second=$$?; \
	wait $$beside; first=$$?; kill -TERM -$$beside 2>/dev/null; beside=; cat "$$log"; \
	$(call TIMED,alone) $(BIN)/pytest -q --durations=30 -m "($(TESTS)) and ($(ALONE))"; third=$$?; \
	if [ -s "$$failed" ]; then echo "make test: each failure, and each try run again (RERUN), in a line (tests/console_report.py)"; cat "$$failed"; fi; \
	if [ "$$first$$second$$third" = 555 ]; then echo "make test: TESTS='$(TESTS)' selects no test"; exit 5; fi; \
	ok $$first && ok $$second && ok $$third

# after a whole `make test` (TESTS left as it is): its groups' seconds order the next runs
test-durations:
	cp $(TEST_TIMES) tests/durations.json

# The inner loop: parsers, archives, statistics and renderers, no tool run (about three minutes on two CPUs: 170 s for them on Python 3.13 here).
test-fast: setup
	$(BIN)/pytest -q $(XDIST) -m unit -p no:cacheprovider

test-newest:
	@if [ -z "$(NEWEST_PYTHON)" ]; then echo "no second Python here: the unit tests ran on $(PYTHON) only"; exit 0; fi; \
	echo "unit tests but the trials on $$($(NEWEST_PYTHON) --version)"; \
	$(SUBMAKE) .venv-newest/bin/pytest && mkdir -p $(BESIDE_TMP) && .venv-newest/bin/pytest -q $(XDIST) \
	    -m "unit and not trials" -p no:cacheprovider --basetemp=$(BESIDE_TMP)/newest

# rebuilt, as .venv is, when the project's dependencies change
.venv-newest/bin/pytest: pyproject.toml
	$(NEWEST_PYTHON) -m venv .venv-newest
	.venv-newest/bin/pip install -q --upgrade pip
	.venv-newest/bin/pip install -q -e '.[dev]'
	@touch $@

test-slow: lint test-setup
	$(BIN)/pytest -q --durations=30 -m slow

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .venv-newest .pytest_cache .mypy_cache .ruff_cache

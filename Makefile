# Two commands do all the set-up on a fresh machine (Python 3.11):
#   make demo   the whole pipeline at demo scale on CPU: training, tables, figures, paper PDF
#   make test   the test suite
# Both create .venv with the pinned dependencies first (once).

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
CORES ?= 2
CIFAR_ROOT ?= data/cifar10
# A value typed on the command line as one shell word, never code: 'it'\''s' for it's.
quote = '$(subst ','\'',$(1))'

# The laptop-scale study (docs/laptop.md): v2, designed from the claims; its central cells
# rerun with two threads per pack from a later commit (robustness). The first study's
# archives (results/laptop/runs.tar, quiet_rerun/) stay for the record-format tests.
LAPTOP_CONFIG := config/laptop_v2.yaml
LAPTOP_ARCHIVE := results/laptop/v2/runs.tar
LAPTOP_RERUN := results/laptop/v2/rerun/runs.tar

# The HTML report: of the demo by default, or of a runs archive's records with
# ARCHIVE=PATH (its config read from the archive unless CONFIG=... names one).
ARCHIVE ?=
REPORT := results/report/report.html
ARCHIVED_CONFIG := results/report/archived.yaml
CONFIG ?= $(if $(ARCHIVE),$(ARCHIVED_CONFIG),config/demo.yaml)
REPORT_FLAGS = --configfile $(call quote,$(CONFIG)) \
	$(if $(ARCHIVE),--config archive=$(call quote,$(ARCHIVE)))

.PHONY: prerequisites venv lock data demo laptop report report-unlocked archived-config slurm-profile bytecode test test-slow lint clean

# Python 3.11 and TeX, checked in a second before anything is built or trained (installed
# with apt-get where we are root; otherwise the message names the command to run).
prerequisites:
	@workflow/prerequisites.sh $(PYTHON)

venv: $(VENV)/.installed

# requirements.lock: every package of the environment (148, the dependencies of the 14 pins
# and of the dev, keras and tensorboard extras), each at one version with the SHA-256 of
# every file the index has for it, for Linux, macOS and Windows alike (docs/setup.md, The
# lock). `make lock` makes it again after a pin in pyproject.toml changes; `make venv`
# installs exactly it, hashes checked, then initmem itself (editable, no dependencies).
# uv installs about three times faster than pip (docs/setup.md); where it cannot be had
# (no index reachable), pip does the install. Both compile the packages' bytecode at
# install (uv only when asked): where PYTHONDONTWRITEBYTECODE is set (this project's
# machines and CI), nothing else ever writes it, and every process would compile pandas,
# torch and Snakemake from source again (6.2 s against 2.5 s to import pandas and torch).
LOCK := requirements.lock
EXTRAS := dev keras tensorboard
UV ?= $(if $(wildcard $(BIN)/uv),$(BIN)/uv,uv)
$(VENV)/.installed: pyproject.toml $(LOCK)
	@echo "venv 1/3: creating $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	@echo "venv 2/3: installing uv, the faster installer, into it (pip does the rest if it cannot)"
	-$(BIN)/pip install --progress-bar on --disable-pip-version-check uv
	@echo "venv 3/3: installing $(LOCK), every package at its locked version and hash (torch, snakemake, tensorboard, and tensorflow-cpu for the Keras reference tests; about 30 s from a local wheel cache with uv, 1.5 minutes with pip, longer downloading), then initmem"
	if [ -x $(BIN)/uv ]; then \
		export VIRTUAL_ENV=$(abspath $(VENV)) && flags="$$($(BIN)/python workflow/uv_flags.py)" && \
		$(BIN)/uv pip install $$flags --compile-bytecode --verify-hashes -r $(LOCK) && \
		$(BIN)/uv pip install $$flags --no-deps -e .; \
	else \
		$(BIN)/pip install --progress-bar on -r $(LOCK) && \
		$(BIN)/pip install --no-deps -e .; \
	fi
	touch $@

# The whole environment resolved again from pyproject.toml's pins against the public index
# (not this machine's mirrors: the hashes are the index's files'), for Python 3.11 on every
# platform. Run it after changing a pin; tests/test_lock.py checks the two agree.
lock:
	$(UV) pip compile pyproject.toml $(foreach e,$(EXTRAS),--extra $(e)) \
		--universal --python-version 3.11 --generate-hashes \
		--custom-compile-command "make lock" -o $(LOCK)

# CIFAR-10 for the demo (workflow/cifar10.sh): checked in seconds before anything is built
# (there, the team's offline copy beside the checkout, or the official release reachable),
# then built from the offline copy or downloaded once the venv exists.
data: venv
	@workflow/cifar10.sh get $(call quote,$(CIFAR_ROOT)) $(BIN)/python

# results/ holds one config's outputs at a time (results/config.yaml): the demo, the
# laptop study and a report never mix their tables, figures, PDF and report there.
OWNS_RESULTS = $(BIN)/initmem results --config

demo: prerequisites
	@workflow/cifar10.sh check $(call quote,$(CIFAR_ROOT))
	$(MAKE) --no-print-directory venv data
	@$(OWNS_RESULTS) config/demo.yaml
	$(BIN)/snakemake all --cores $(CORES) --configfile config/demo.yaml

# The laptop-scale study's tables, figures and claims rebuilt from its committed archive:
# no training, no data set needed. The claims are judged on its rerun too (robustness).
laptop: venv
	@$(OWNS_RESULTS) $(LAPTOP_CONFIG)
	$(BIN)/snakemake tables figures claims --cores $(CORES) \
		--configfile $(LAPTOP_CONFIG) --config archive=$(LAPTOP_ARCHIVE) \
		'compare_archives=["$(LAPTOP_RERUN)"]'
	cp results/claims/claims.md results/laptop/claims.md
	cp results/figures/fig1.png results/laptop/fig1.png

# Builds what the report shows (training the demo first if `make demo` has not), then the
# report itself: one self-contained HTML file. The whole recipe holds results/report/.lock
# (a second `make report` is refused at once): its two Snakemake calls read the archived
# config, which another `make report ARCHIVE=...` would otherwise rewrite between them.
# A dry run (make -n report) takes no lock: it runs only the sub-make, which prints.
DRY_RUN = $(findstring n,$(firstword -$(MAKEFLAGS)))
report: venv
	@mkdir -p $(dir $(ARCHIVED_CONFIG))
	@$(if $(DRY_RUN),,$(BIN)/initmem report locked $(dir $(ARCHIVED_CONFIG)).lock --) \
		$(MAKE) --no-print-directory report-unlocked

report-unlocked: $(if $(ARCHIVE),archived-config)
	@$(OWNS_RESULTS) $(call quote,$(CONFIG))
	$(BIN)/snakemake report_files --cores $(CORES) $(REPORT_FLAGS)
	$(BIN)/snakemake --report $(REPORT) report_files $(REPORT_FLAGS)
	@echo "open $(REPORT) in a browser"

# Written afresh each time (phony): the archive named may be older than the last one's.
archived-config:
	mkdir -p $(call quote,$(dir $(ARCHIVED_CONFIG)))
	$(BIN)/python -m initmem archive config $(call quote,$(ARCHIVE)) \
		--out $(call quote,$(ARCHIVED_CONFIG))

# Once per user on a SLURM cluster: the named profile, so `snakemake --profile slurm all`
# works as typed (FORCE=1 replaces a different profile already there).
slurm-profile: venv
	$(BIN)/initmem slurm-profile $(if $(ACCOUNT),--account $(call quote,$(ACCOUNT))) \
		$(if $(PARTITION),--partition $(call quote,$(PARTITION))) $(if $(FORCE),--force)

# One torch thread per test worker: -n auto runs a worker per core (threads would oversubscribe).
# --dist loadgroup: the SLURM tests share one worker (they read one cluster's queue).
# --max-worker-restart=0: a worker that dies (an abort in C code, a hung test ended by
# faulthandler_timeout) ends the session naming its test; pytest-xdist 3.8's loadgroup
# scheduling can hang for good once it replaces a dead worker (pytest-xdist#1323, #1378).
TESTS = OMP_NUM_THREADS=1 $(BIN)/pytest -q -n auto --dist loadgroup --max-worker-restart=0
# initmem's bytecode, written first for the same reason (each test starts dozens of
# initmem and Snakemake processes); a source edited later is compiled again, never stale.
bytecode: venv
	$(BIN)/python -m compileall -q src

test: bytecode  # every stage, fast: the slow end-to-end and SLURM cases are test-slow's
	$(TESTS) -m "not slow and not slurm"

test-slow: bytecode  # CI runs both
	$(TESTS) -m "slow or slurm"

lint: venv
	$(BIN)/ruff check src tests bench workflow/uv_flags.py
	$(BIN)/snakefmt --check Snakefile workflow
	$(BIN)/snakemake --lint --configfile config/test.yaml

clean:  # everything the pipeline wrote, but not what is tracked: results/README.md, laptop/
	find results -mindepth 1 -maxdepth 1 ! -name README.md ! -name laptop -exec rm -rf {} +
	rm -rf .snakemake logs

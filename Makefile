# Two commands do all the set-up on a fresh machine (Python 3.11):
#   make demo   the whole pipeline at demo scale on CPU: training, tables, figures, paper PDF
#   make test   the test suite
# Both create .venv with the pinned dependencies first (once).

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
CORES ?= 2
CIFAR_ROOT ?= data/cifar10
SHARED_CIFAR := ../shared/data/make_cifar10_batches.py

LAPTOP_ARCHIVE := results/laptop/runs.tar

# The HTML report: of the demo by default, or of a runs archive's records with
# ARCHIVE=PATH (its config read from the archive unless CONFIG=... names one).
ARCHIVE ?=
REPORT := results/report/report.html
ARCHIVED_CONFIG := results/report/archived.yaml
CONFIG ?= $(if $(ARCHIVE),$(ARCHIVED_CONFIG),config/demo.yaml)
REPORT_FLAGS = --configfile $(CONFIG) $(if $(ARCHIVE),--config archive=$(ARCHIVE))

.PHONY: prerequisites venv demo laptop report slurm-profile test lint clean

# Python 3.11 and TeX, checked in a second before anything is built or trained (installed
# with apt-get where we are root; otherwise the message names the command to run).
prerequisites:
	@workflow/prerequisites.sh $(PYTHON)

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,keras,tensorboard]'
	touch $@

# The demo reads CIFAR-10 from $(CIFAR_ROOT); on machines with the team's offline copy it
# is built from there, elsewhere the data module explains how to download or point at one.
$(CIFAR_ROOT)/cifar-10-batches-py:
	@if [ -f $(SHARED_CIFAR) ]; then $(BIN)/python $(SHARED_CIFAR) $(CIFAR_ROOT); fi

demo: prerequisites
	$(MAKE) --no-print-directory venv $(CIFAR_ROOT)/cifar-10-batches-py
	$(BIN)/snakemake all --cores $(CORES) --configfile config/demo.yaml

# The laptop-scale study's tables, figures and claims rebuilt from its committed archive:
# no training, no data set needed.
laptop: venv
	$(BIN)/snakemake tables figures claims --cores $(CORES) \
		--configfile config/laptop.yaml --config archive=$(LAPTOP_ARCHIVE)

# Builds what the report shows (training the demo first if `make demo` has not), then the
# report itself: one self-contained HTML file.
report: venv $(if $(ARCHIVE),$(ARCHIVED_CONFIG))
	$(BIN)/snakemake report_files --cores $(CORES) $(REPORT_FLAGS)
	$(BIN)/snakemake --report $(REPORT) report_files $(REPORT_FLAGS)
	@echo "open $(REPORT) in a browser"

$(ARCHIVED_CONFIG): $(ARCHIVE)
	mkdir -p $(@D)
	$(BIN)/python -m initmem archive config $(ARCHIVE) > $@

# Once per user on a SLURM cluster: the named profile, so `snakemake --profile slurm all`
# works as typed (FORCE=1 replaces a different profile already there).
slurm-profile: venv
	$(BIN)/initmem slurm-profile $(if $(ACCOUNT),--account $(ACCOUNT)) \
		$(if $(PARTITION),--partition $(PARTITION)) $(if $(FORCE),--force)

test: venv
	$(BIN)/pytest -q

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/snakefmt --check Snakefile workflow
	$(BIN)/snakemake --lint --configfile config/test.yaml

clean:  # everything the pipeline wrote, but not what is tracked: results/README.md, laptop/
	find results -mindepth 1 -maxdepth 1 ! -name README.md ! -name laptop -exec rm -rf {} +
	rm -rf .snakemake logs

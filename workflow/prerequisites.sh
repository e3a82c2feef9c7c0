#!/usr/bin/env bash
# What `make demo` needs from the system before it builds the venv and trains: Python 3.11
# with venv, and TeX (latexmk, pdflatex and the LaTeX packages paper/*.tex uses) for the
# PDF. Checks in about a second. Missing pieces are installed where that is safe to do
# unasked (root with apt-get, as in CI and containers, unless PREREQUISITES_INSTALL=no);
# elsewhere it stops at once, printing the command to run on Debian/Ubuntu, Fedora and macOS.
#   workflow/prerequisites.sh [PYTHON]      (default python3.11)
set -uo pipefail

PYTHON=${1:-python3.11}
# The .sty files paper/*.tex loads (fontenc, graphicx and amsmath come with any LaTeX).
STYLES="booktabs multirow makecell placeins caption xcolor hyperref geometry mathptmx amssymb"

APT="python3.11 python3.11-venv latexmk texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended"
DNF="python3.11 latexmk texlive-collection-latexrecommended texlive-collection-latexextra texlive-collection-fontsrecommended"
BREW="brew install python@3.11 && brew install --cask mactex-no-gui"

missing() {
    local gaps=""
    if ! command -v "$PYTHON" >/dev/null 2>&1 || ! "$PYTHON" -c "import venv, ensurepip" 2>/dev/null; then
        gaps="$gaps $PYTHON (with its venv module)"
    fi
    for tool in latexmk pdflatex kpsewhich; do
        command -v "$tool" >/dev/null 2>&1 || gaps="$gaps $tool"
    done
    if command -v kpsewhich >/dev/null 2>&1; then
        for style in $STYLES; do
            kpsewhich "$style.sty" >/dev/null 2>&1 || gaps="$gaps $style.sty"
        done
    fi
    echo "${gaps# }"
}

gaps=$(missing)
[ -z "$gaps" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "${PREREQUISITES_INSTALL:-yes}" != no ]; then
    echo "prerequisites: missing $gaps; installing with apt-get: $APT"
    export DEBIAN_FRONTEND=noninteractive
    echo "prerequisites: apt-get update"
    apt-get update -q >/dev/null
    echo "prerequisites: apt-get install (TeX is about 300 MB; a few minutes)"
    apt-get install -y -q --no-install-recommends $APT | grep --line-buffered -E '^(Get|Setting up)' || true
    gaps=$(missing)
    [ -z "$gaps" ] && exit 0
fi

cat >&2 <<EOF
make demo: missing $gaps
Install them, then run make demo again:
  Debian/Ubuntu:  sudo apt-get install $APT
  Fedora:         sudo dnf install $DNF
  macOS:          $BREW
(Another Python 3.11: make demo PYTHON=/path/to/python3.11.)
EOF
exit 1

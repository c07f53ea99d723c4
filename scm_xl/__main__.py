"""`python -m scm_xl`: the same command line as the `scm-xl` script."""

from __future__ import annotations

from scm_xl.cli import main

if __name__ == "__main__":
    main(prog_name="scm-xl")

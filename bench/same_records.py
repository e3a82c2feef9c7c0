"""Do two record folders hold the same numbers? For refactors: train the same pack specs
with the old and the new code, then

    python bench/same_records.py OLD_RUNS NEW_RUNS

compares every record file of NEW_RUNS with OLD_RUNS' file at the same path, column by
column, except the provenance columns (which code and process made it, where, how long).
Files are read through the record format's checksum check, so a damaged file is an
error, not a difference."""

import sys
from pathlib import Path

from initmem.records.files import PROVENANCE_COLUMNS, RECORD_FILES, read_run_files

NOT_COMPARED = set(PROVENANCE_COLUMNS)


def differing_columns(old: Path, new: Path) -> list[str]:
    a, b = (read_run_files(path.parent)[RECORD_FILES.index(path.name)].to_pandas()
            for path in (old, new))
    if set(a.columns) != set(b.columns):
        return sorted(set(a.columns) ^ set(b.columns))
    return [c for c in a.columns if c not in NOT_COMPARED and not a[c].equals(b[c])]


def main(old_root: Path, new_root: Path) -> int:
    files = [f for f in sorted(new_root.rglob("*.parquet")) if ".checkpoints" not in f.parts]
    differ = 0
    for new in files:
        columns = differing_columns(old_root / new.relative_to(new_root), new)
        if columns:
            differ += 1
            print(f"{new.relative_to(new_root)}: {', '.join(columns)} differ")
    print(f"{len(files) - differ} of {len(files)} record files identical "
          f"(not compared: {', '.join(sorted(NOT_COMPARED))})")
    return 1 if differ or not files else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))

"""Where the app keeps its files: the project's cache/ and data/ folders, overridable by environment."""
import os
import stat
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("FWSAPP_CACHE", PROJECT_DIR / "cache"))
DEMO_DATA_DIR = PROJECT_DIR / "data"
EXPERIMENTS_DIR = PROJECT_DIR / "experiments"  # the shipped experiment specs
DEFAULT_DB = Path(os.environ.get("FWSAPP_DB", CACHE_DIR / "fwsapp.duckdb"))
UPLOADS_DIR = CACHE_DIR / "uploads"  # datasets uploaded in the app


def read_input(path) -> bytes:
    """The bytes of an input file the user named; one that cannot be read (missing, a folder, not permitted) is refused
    with the path and why, not the operating system's bare error."""
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error}); give the path of a readable file.") \
            from None


def replaceable_output(target: Path, force: bool) -> int | None:
    """The permission bits an output file keeps when it is replaced, None when there is none yet (its folder there).
    Only a regular file is ever replaced, and only with `force`: never a device (`/dev/null`), a folder, a pipe or a
    link."""
    try:
        status = target.lstat()
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise ValueError(f"The folder {target.parent} does not exist: create it, or write --out elsewhere.") from None
        return None
    if not stat.S_ISREG(status.st_mode):
        raise ValueError(f"--out {target} exists and is not a regular file (a device, a folder, a pipe or a link): "
                         "write to a file path.")
    if not force:
        raise ValueError(f"--out {target} exists: pass --force to replace it, or write elsewhere.")
    return stat.S_IMODE(status.st_mode)


def write_output(target, data: bytes, force: bool = False) -> None:
    """Write `data` to an output file the user named: a new file, or with `force` a regular file replaced whole (its
    permissions kept); never a device, folder, pipe or link, and nothing half-written if the write fails."""
    target = Path(target)
    mode = replaceable_output(target, force)
    partial = target.with_name(f".{target.name}.partial")
    try:
        partial.write_bytes(data)
        if mode is not None:
            partial.chmod(mode)
        partial.replace(target)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise OSError(f"--out {target}: {error.strerror or error}; nothing was written.") from None

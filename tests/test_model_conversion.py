"""The embedded model's one-off conversion when several processes start at once (the app and a job, test workers)."""
import subprocess
import sys

from tests.conftest import PROJECT

# A stand-in conversion, slow enough that the processes overlap, that counts itself in a file each time it runs.
CONVERT = """
import sys, time
from pathlib import Path
import fwsapp.models as models

cache = Path(sys.argv[1])

def convert(target):
    with open(cache / "conversions", "a") as count:
        count.write("1")
    partial = target.with_name(target.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    time.sleep(1.5)
    for name in ("model.safetensors", "tokenizer_config.json"):
        (partial / name).write_text(name)
    partial.replace(target)

models._convert_embedded = convert
print(models.converted_embedded_folder(cache))
"""


def test_processes_that_start_together_convert_the_embedded_model_once(tmp_path):
    processes = [subprocess.Popen([sys.executable, "-c", CONVERT, str(tmp_path)], cwd=PROJECT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert (tmp_path / "conversions").read_text() == "1"
    folders = {stdout.strip() for stdout, _ in outputs}
    assert len(folders) == 1 and (tmp_path / "models").is_dir()
    assert sorted(path.name for path in (tmp_path / "models").iterdir()) == ["smollm2-135m-instruct",
                                                                           "smollm2-135m-instruct.lock"]

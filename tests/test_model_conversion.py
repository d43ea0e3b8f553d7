"""The embedded model's one-off conversion when several processes start at once (the app and a job, test workers), and
its tokenizer's, which needs no model."""
import subprocess
import sys

from tests.conftest import PROJECT

# A stand-in conversion, slow enough that the processes overlap, that counts itself in a file each time it runs.
CONVERT = """
import sys, time
from pathlib import Path
import fwsapp.models as models

cache = Path(sys.argv[1])

def convert(folder, cache_dir):
    with open(cache / "conversions", "a") as count:
        count.write("1")
    folder.mkdir(parents=True)
    time.sleep(1.5)
    for name in ("model.safetensors", "tokenizer_config.json"):
        (folder / name).write_text(name)

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


def test_the_embedded_tokenizer_is_read_from_the_gguf_without_converting_the_model(tmp_path):
    """Detecting the embedded model's texts (the Detect page, `detect`) needs its tokenizer, not its weights."""
    from fwsapp.models import EMBEDDED_MODEL
    from fwsapp.models.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(EMBEDDED_MODEL, tmp_path)
    assert tokenizer.encode("Metformin 500 mg twice daily does not cause hypoglycaemia.") == [
        12582, 584, 254, 216, 37, 32, 32, 9209, 6757, 2956, 1072, 441, 1728, 33103, 6246, 8429, 30]  # the model's own
    assert tokenizer.vocab_size == 49152
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tokenizers"]  # no model converted

import json

import pytest

from fwsapp.data.loaders import DatasetError, load_dataset
from tests.conftest import SHARED_DATA


@pytest.mark.parametrize("task", ["completion", "qa", "summarization"])
def test_demo_sets_load_and_follow_the_task_shape(task):
    samples = load_dataset(task)
    assert 18 <= len(samples) <= 25
    assert all(sample.prompt and sample.reference for sample in samples)
    if task == "qa":
        assert all(len(s.prompt.split()) == 10 and s.prompt.endswith("?") for s in samples)
    if task == "summarization":
        assert all(s.prompt.startswith("Write a short question that summarizes this question: ") for s in samples)


def test_processed_json_jsonl_and_csv(tmp_path):
    rows = [{"prompt": "Q one?", "natural": "A one."}, {"prompt": "Q two?", "reference": "A two."}]
    (tmp_path / "a.json").write_text(json.dumps(rows))
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "a.csv").write_text("prompt,reference\nQ one?,A one.\nQ two?,A two.\n")
    for name in ("a.json", "a.jsonl", "a.csv"):
        samples = load_dataset("qa", tmp_path / name)
        assert [s.reference for s in samples] == ["A one.", "A two."]


def test_raw_qa_table_applies_the_rules(tmp_path):
    good = "What is the usual treatment for acute gout attacks today?"
    (tmp_path / "raw.csv").write_text(f"question,answer\n{good},Naproxen.\nToo short?,No.\n")
    samples = load_dataset("qa", tmp_path / "raw.csv")
    assert [s.prompt for s in samples] == [good]


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="../shared/data is not beside the project")
def test_paper_processed_files_load():
    assert len(load_dataset("qa", SHARED_DATA / "healthqa_qa.json")) == 200
    assert len(load_dataset("summarization", SHARED_DATA / "meqsum_summarization.json")) == 200


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("empty.json", b"", "empty.json: the file is empty"),
        ("broken.json", b'[{"prompt": "a", ', "broken.json: broken JSON at line 1"),
        ("latin1.csv", "prompt,reference\nfi\u00e8vre?,x\n".encode("latin-1"), "latin1.csv: is not UTF-8"),
        ("cols.json", json.dumps([{"text": "a", "label": "b"}]).encode(), "cols.json, row 1: unknown columns"),
        ("ref.json", json.dumps([{"prompt": "a", "natural": "b"}, {"prompt": "c"}]).encode(),
         "ref.json, row 2: missing the reference"),
        ("blank.json", json.dumps([{"prompt": " ", "natural": "b"}]).encode(), "blank.json, row 1: 'prompt' must be non-empty"),
        ("lines.jsonl", b'{"prompt": "a", "natural": "b"}\n{oops}\n', "lines.jsonl, row 2: broken JSON"),
        ("object.json", b'{"prompt": "a"}', "object.json: expected a JSON list"),
    ],
)
def test_malformed_files_name_the_file_row_and_problem(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DatasetError) as error:
        load_dataset("qa", path)
    assert message in str(error.value)

"""Nothing silently wrong in the user's data (issue #57 item 2 and the data parts of item 7).

Texts shared between splits and texts repeated within one are warned with counts; labels mixing
words and numbers are refused naming the rows; numbers written apart (``1``, ``"1"``, ``1.0``) are
one class with a note; a regression target is said; truncation at ``max_length`` is said with
its share; unreadable files name the line and the fix; two data sets never share a task name in
one store. Every data set is written by the test; the reads are those ``train`` and ``reproduce``
make (:func:`robustkit.data.user_data.run_fields`, :func:`~robustkit.data.user_data.read`)."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from robustkit.data import user_data
from robustkit.data.batches import TruncatedTextsWarning, encode
from robustkit.data.user_checks import UserDataWarning
from robustkit.errors import TaskError


def rows(n: int, start: int = 0) -> list[dict]:
    """n distinct texts, three word labels (55/25/20 %, as the issue's walk)."""
    labels = ["pos"] * 11 + ["neg"] * 5 + ["mixed"] * 4
    return [
        {"text": f"review number {i} says {labels[i % 20]}", "label": labels[i % 20]} for i in range(start, start + n)
    ]


def leaky_folder(folder: Path) -> Path:
    """train 500 rows; test 250 rows of which 120 repeat train texts in other case and spacing."""
    folder.mkdir(parents=True)
    pd.DataFrame(rows(500)).to_csv(folder / "train.csv", index=False)
    repeated = [{"text": "  " + r["text"].upper().replace(" ", "   "), "label": r["label"]} for r in rows(120)]
    pd.DataFrame(rows(130, start=1000) + repeated).to_csv(folder / "test.csv", index=False)
    pd.DataFrame(rows(60, start=2000)).to_csv(folder / "validation.csv", index=False)
    return folder


def notes_of(data: str, **options) -> list[str]:
    """The warnings ``run_fields`` (what train --data and reproduce --data call) gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        user_data.run_fields(data, **options)
    return [str(w.message) for w in caught if issubclass(w.category, UserDataWarning)]


def test_test_rows_repeating_train_are_warned_with_counts_for_a_split_folder(tmp_path):
    folder = leaky_folder(tmp_path / "leaky")
    notes = notes_of(str(folder))
    shared = [n for n in notes if "texts in two splits" in n]
    assert len(shared) == 1 and str(folder) in shared[0]
    assert "test repeats a train text in 120 of its 250 rows (48.0%; first: row 130)" in shared[0]
    assert "validation" not in shared[0]  # validation shares nothing


def test_a_file_robustkit_splits_keeps_texts_equal_but_for_case_and_spacing_in_one_split(tmp_path):
    base = rows(400)
    twins = [{"text": r["text"].upper() + "  ", "label": r["label"]} for r in base[:150]]
    path = tmp_path / "twins.csv"
    pd.DataFrame(base + twins).to_csv(path, index=False)
    loaded = user_data.read(str(path))
    keys = {s: {" ".join(t.split()).casefold() for t in split["text"]} for s, split in loaded.splits.items()}
    assert not (keys["train"] & keys["validation"] or keys["train"] & keys["test"] or keys["validation"] & keys["test"])
    assert not any("texts in two splits" in n for n in loaded.notes)
    repeated = [n for n in loaded.notes if "rows repeating a text of their own split" in n]
    assert len(repeated) == 1 and str(path) in repeated[0]
    counted = sum(int(part.split(" of ")[0].split()[-1]) for part in repeated[0].split(": ", 3)[3].split("; ")[:3])
    assert counted == 150  # every twin counted once, in whichever split its text went


def test_repeats_with_another_label_are_counted_apart(tmp_path):
    train = rows(200) + [{"text": "review number 0 says pos", "label": "neg"}] * 2 + [rows(1)[0]]
    folder = tmp_path / "dups"
    folder.mkdir()
    pd.DataFrame(train).to_csv(folder / "train.csv", index=False)
    pd.DataFrame(rows(40, start=500)).to_csv(folder / "test.csv", index=False)
    pd.DataFrame(rows(40, start=600)).to_csv(folder / "dev.csv", index=False)
    notes = user_data.read(str(folder)).notes
    assert any("train 3 of 203, 2 of them with another label (first: row 200)" in n for n in notes), notes


def test_clean_data_gives_no_note(tmp_path):
    path = tmp_path / "clean.csv"
    pd.DataFrame(rows(300)).to_csv(path, index=False)
    assert user_data.read(str(path)).notes == ()


def test_a_number_among_word_labels_is_refused_naming_its_rows(tmp_path):
    frame = pd.DataFrame(rows(300))
    frame.loc[[7, 40, 41], "label"] = "1"
    path = tmp_path / "words.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(TaskError) as refused:
        user_data.read(str(path))
    message = str(refused.value)
    assert str(path) in message and "mixes words and numbers: 3 rows hold a number ('1'" in message
    assert "train rows 7, 40, 41" in message and "\n" not in message


def test_numbers_written_apart_are_one_class_with_a_note(tmp_path):
    path = tmp_path / "mixed.jsonl"
    labels = [0] * 30 + [1] * 24 + ["1"] * 6
    path.write_text("".join(json.dumps({"text": f"text {i}", "label": v}) + "\n" for i, v in enumerate(labels)))
    loaded = user_data.read(str(path))
    assert loaded.task.label_names == ("0", "1") and not loaded.task.is_regression
    assert any(
        'as integers (1) in 54 rows, as text ("1") in 6 rows: read as one class per whole number (0, 1)' in n
        for n in loaded.notes
    )


def test_whole_numbers_read_as_decimals_are_classes_unless_kind_regression(tmp_path):
    """The issue's JSONL of labels 0, 1 and 1.0 trained a regression without a word."""
    path = tmp_path / "decimals.jsonl"
    labels = [0] * 30 + [1] * 24 + [1.0] * 6
    path.write_text("".join(json.dumps({"text": f"text {i}", "label": v}) + "\n" for i, v in enumerate(labels)))
    loaded = user_data.read(str(path))
    assert loaded.task.label_names == ("0", "1") and loaded.task.metrics[0] == "accuracy"
    assert any("read as one class per whole number (0, 1)" in n and "#kind=regression" in n for n in loaded.notes)
    forced = user_data.run_fields(str(path) + "#kind=regression")
    task = user_data.registered(forced["task"]).task
    assert task.is_regression and forced["data_dir"].endswith("#kind=regression")
    assert user_data.read(forced["data_dir"]).fingerprint != loaded.fingerprint


def test_a_regression_target_is_said_in_one_line(tmp_path):
    path = tmp_path / "scores.csv"
    pd.DataFrame({"text": [f"t {i}" for i in range(60)], "score": [i / 7 for i in range(60)]}).to_csv(path, index=False)
    notes = notes_of(str(path))
    assert len(notes) == 1 and "is trained as a regression (numbers that are not whole, e.g. 0.142857)" in notes[0]


def test_a_tsv_named_csv_and_a_latin1_byte_name_the_line_and_the_fix(tmp_path):
    tsv = tmp_path / "tabs.csv"
    tsv.write_text("text\tlabel\n" + "".join(f"t {i}\t{'a' if i % 2 else 'b'}\n" for i in range(23)) + "x, y\ta\n")
    with pytest.raises(
        TaskError,
        match=r"line 25 has 2 fields where the header has 1; the file looks tab-separated.*"
        r"name it tabs.tsv",
    ):
        user_data.read(str(tsv))
    tsv.write_text("text\tlabel\n" + "".join(f"t {i}\t{'a' if i % 2 else 'b'}\n" for i in range(24)))
    with pytest.raises(TaskError, match="one column holding tabs; the file looks tab-separated: name it tabs.tsv"):
        user_data.read(str(tsv))
    latin = tmp_path / "latin.csv"
    head = ("text,label\n" + "".join(f"t {i},{'a' if i % 2 else 'b'}\n" for i in range(40))).encode()
    latin.write_bytes(head + "caf\xe9,a\n".encode("latin-1"))
    with pytest.raises(TaskError) as refused:
        user_data.read(str(latin))
    assert f"byte 0xe9 at line 42 (byte offset {len(head) + 3:,}) is not UTF-8; re-save the file as UTF-8" in str(
        refused.value
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 0\n')
    with pytest.raises(TaskError, match="line 2 is not JSON"):
        user_data.read(str(broken))


def _fake_run(store: Path, name: str, task: str, data_dir: str, fingerprint: str) -> None:
    """A run folder whose manifest records its task and data, as training writes them."""
    (store / name).mkdir(parents=True)
    manifest = {"spec": {"task": task, "data_dir": data_dir}, "data": {"source": "user", "fingerprint": fingerprint}}
    (store / name / "manifest.json").write_text(json.dumps(manifest))


def test_two_data_sets_never_share_a_task_name_in_one_store(tmp_path):
    from robustkit.store.task_names import check_task_free

    def joined(data, **options):  # what train and reproduce do: read the data, then check the store
        fields = user_data.run_fields(data, **options)
        check_task_free(store, fields["task"])
        return fields

    csv, jsonl = tmp_path / "mixed.csv", tmp_path / "mixed.jsonl"
    pd.DataFrame(rows(200)).to_csv(csv, index=False)
    pd.DataFrame(rows(200, start=300)).to_json(jsonl, orient="records", lines=True)
    store = tmp_path / "store"
    first = joined(str(csv))
    _fake_run(store, "mixed-run-0", "mixed", first["data_dir"], user_data.registered("mixed").fingerprint)
    assert joined(str(csv)) == first  # the same data again
    with pytest.raises(TaskError) as refused:
        joined(str(jsonl))
    message = str(refused.value)
    assert f"task 'mixed' of store {store} is already other data ({csv}, e.g. run mixed-run-0)" in message
    assert "--task-name mixed-jsonl" in message
    assert joined(str(jsonl), name="mixed-jsonl")["task"] == "mixed-jsonl"
    # the same file, edited since: not a second data set (every verb flags the edit)
    _fake_run(store, "mixed-run-1", "mixed", first["data_dir"], "user:sha256:" + "0" * 64)
    assert joined(str(csv))["task"] == "mixed"


def _tokenizer(tmp_path: Path, fast: bool):
    """A word-piece tokenizer of a 30-word vocabulary, written here (nothing downloaded)."""
    from transformers import BertTokenizer, BertTokenizerFast

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[f"w{i}" for i in range(25)]]) + "\n")
    return (BertTokenizerFast if fast else BertTokenizer)(vocab_file=str(vocab))


@pytest.mark.parametrize("fast", [True, False])
def test_truncation_is_said_with_the_share_of_texts_cut(tmp_path, fast):
    tokenizer = _tokenizer(tmp_path, fast)
    long_text, exact = " ".join(["w1"] * 5000), " ".join(["w2"] * 14)  # exact: 14 + [CLS] [SEP] = max_length
    texts = [(long_text,)] * 3 + [(exact,)] * 5 + [("w3 w4",)] * 32
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        features = encode(texts, tokenizer, 16)
    said = [str(w.message) for w in caught if issubclass(w.category, TruncatedTextsWarning)]
    assert said == [
        "3 of 40 texts of a split (7.5%) are longer than max_length 16 tokens and are cut to it, the rest unread; "
        "--max-length N reads more of each (at more memory and time)"
    ]
    assert max(len(f["input_ids"]) for f in features) == 16
    pairs = [(long_text, "w5")] + [("w3", "w4")] * 9
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        encode(pairs, tokenizer, 16)
    assert [str(w.message).split(" are longer")[0] for w in caught] == ["1 of 10 texts of a split (10.0%)"]


def test_the_truncation_note_names_the_split_and_task_a_run_encodes(tmp_path):
    """As training and the analyses encode a split (robustkit.train.evaluate.encode_split), the
    note says which split of which task was cut, not "a split" (the #57 walk, D6)."""
    from types import SimpleNamespace

    import datasets

    from robustkit.train.evaluate import encode_split

    split = datasets.Dataset.from_dict({"text": [" ".join(["w1"] * 50), "w2 w3"], "label": [0, 1]})
    task = SimpleNamespace(name="mine", text_fields=("text",))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        encode_split(split, task, _tokenizer(tmp_path, True), 16, "validation")
    said = [str(w.message) for w in caught if issubclass(w.category, TruncatedTextsWarning)]
    assert len(said) == 1 and said[0].startswith("1 of 2 texts of the validation split of 'mine' (50.0%)")


def test_the_leak_is_one_warning_line_of_a_fresh_reproduce_plan(tmp_path):
    folder = leaky_folder(tmp_path / "leaky")
    argv = ["reproduce", "han2021/fig2", "--plan", "--data", str(folder), "--store", str(tmp_path / "store")]
    code = f"import sys; from robustkit.cli import main; sys.exit(main({argv!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "texts in two splits" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "in 120 of its 250 rows" in lines[0]


def test_a_notebook_dataset_dict_sharing_texts_is_warned_by_register():
    import datasets

    train, test = pd.DataFrame(rows(200)), pd.DataFrame(rows(30, start=500) + rows(10))
    splits = datasets.DatasetDict(
        {"train": datasets.Dataset.from_pandas(train), "test": datasets.Dataset.from_pandas(test)}
    )
    with pytest.warns(
        UserDataWarning, match=r"^task 'dd': texts in two splits .*test repeats a train text in 10 of its 40"
    ):
        user_data.register(splits, name="dd")

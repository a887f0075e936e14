"""Task registry, splits (embedded, low-resource, GLUE TSV and hub), metrics."""

from __future__ import annotations

import datasets
import numpy as np
import pytest

from robustkit.data import metrics, tasks
from robustkit.errors import TaskError

# --- registry ---------------------------------------------------------------------------------


def test_unknown_task_names_the_value_and_lists_known_tasks():
    with pytest.raises(TaskError) as error:
        tasks.get_task("bogus")
    message = str(error.value)
    assert "'bogus'" in message
    for name in ("cola", "mnli-mm", "stsb", "rt", "polarity"):
        assert name in message


def test_registry_metrics_follow_he2021():
    main = {name: task.main_metric for name, task in tasks.TASKS.items()}
    assert main["cola"] == "mcc" and main["mrpc"] == main["qqp"] == "f1" and main["stsb"] == "spearman"
    assert tasks.get_task("stsb").num_labels == 1 and tasks.get_task("mnli").num_labels == 3
    assert tasks.get_task("mnli-mm").validation_split == "validation_mismatched"
    assert {tasks.get_task(n).source for n in ("rt", "polarity")} == {"embedded"}
    for task in tasks.TASKS.values():
        assert task.main_metric in task.metrics
        assert len(task.label_names) == (0 if task.is_regression else task.num_labels)


# --- embedded tasks ---------------------------------------------------------------------------

SIZES = {"rt": (10248, 1281, 1279), "polarity": (3200, 400, 400)}


@pytest.mark.parametrize("name", ["rt", "polarity"])
def test_embedded_split_sizes_balance_and_fingerprints(name):
    splits = tasks.load_splits(name)
    assert tuple(len(splits[s]) for s in tasks.SPLITS) == SIZES[name]
    everything = np.concatenate([np.asarray(splits[s]["label"]) for s in tasks.SPLITS])
    for split in tasks.SPLITS:
        assert splits[split].column_names == ["sentence", "label", "idx"]
        assert abs(np.mean(splits[split]["label"]) - everything.mean()) < 0.01  # stratified
    assert tasks.split_fingerprint(splits) == tasks.EXPECTED_FINGERPRINTS[name]


@pytest.mark.parametrize("name", ["rt", "polarity"])
def test_embedded_splits_share_no_text_and_are_stable(name):
    splits = tasks.load_splits(name)
    texts = {s: set(splits[s]["sentence"]) for s in tasks.SPLITS}
    assert not texts["train"] & texts["test"]
    assert not texts["train"] & texts["validation"]
    assert not texts["validation"] & texts["test"]
    tasks._embedded_splits.cache_clear()  # rebuild from the file, not from the cache
    assert tasks.split_fingerprint(tasks.load_splits(name)) == tasks.EXPECTED_FINGERPRINTS[name]


def test_rt_has_repeated_texts_that_stay_together():
    splits = tasks.load_splits("rt")
    texts = [text for split in tasks.SPLITS for text in splits[split]["sentence"]]
    assert len(set(texts)) == len(texts) - 56  # the repeats exist; the test above keeps them together
    assert sum(len(set(splits[split]["sentence"])) for split in tasks.SPLITS) == len(set(texts))


# --- low-resource splits (He et al. 2021 §3.2) ------------------------------------------------


def test_low_resource_sizes_disjoint_and_test_is_original_validation():
    full = tasks.load_splits("polarity")
    splits = tasks.load_splits("polarity", train_size=1000, split_seed=3)
    assert (len(splits["train"]), len(splits["validation"])) == (1000, 1000)
    train_idx, val_idx = set(splits["train"]["idx"]), set(splits["validation"]["idx"])
    assert len(train_idx) == 1000 and not train_idx & val_idx
    assert train_idx | val_idx <= set(full["train"]["idx"])
    fingerprints = tasks.split_fingerprint(splits)
    assert fingerprints["test"] == tasks.split_fingerprint(full)["validation"]


def test_low_resource_is_seeded_and_nested():
    one = tasks.load_splits("polarity", train_size=500, split_seed=1)
    again = tasks.load_splits("polarity", train_size=500, split_seed=1)
    other = tasks.load_splits("polarity", train_size=500, split_seed=2)
    larger = tasks.load_splits("polarity", train_size=1500, split_seed=1)
    assert tasks.split_fingerprint(one) == tasks.split_fingerprint(again)
    assert set(one["train"]["idx"]) != set(other["train"]["idx"])
    assert set(one["validation"]["idx"]) != set(other["validation"]["idx"])
    assert set(one["train"]["idx"]) <= set(larger["train"]["idx"])
    assert one["validation"]["idx"] == larger["validation"]["idx"]


def test_low_resource_too_large_names_n_and_available_count():
    with pytest.raises(TaskError, match=r"train_size=2201 .* 2200 training examples"):
        tasks.load_splits("polarity", train_size=2201)  # 3200 train - 1000 validation
    with pytest.raises(TaskError, match="positive"):
        tasks.load_splits("polarity", train_size=0)


# --- GLUE from local TSV files ----------------------------------------------------------------


def _tsv(*rows: list[str]) -> str:
    """TSV text, one row of fields per line (a header, if any, is just the first row)."""
    return "".join("\t".join(row) + "\n" for row in rows)


MNLI_HEAD = [
    "index",
    "promptID",
    "pairID",
    "genre",
    "sentence1_binary_parse",
    "sentence2_binary_parse",
    "sentence1_parse",
    "sentence2_parse",
    "sentence1",
    "sentence2",
]


def _mnli(*rows, dev=False) -> str:
    """MNLI TSV: train has label1, dev label1..label5, both end with gold_label."""
    votes = 5 if dev else 1
    head = MNLI_HEAD + [f"label{i + 1}" for i in range(votes)] + ["gold_label"]
    return _tsv(
        head,
        *[
            [
                str(i),
                "1",
                f"{i}n",
                "fiction",
                "( a )",
                "( b )",
                "(ROOT a)",
                "(ROOT b)",
                premise,
                hypothesis,
                *[label] * votes,
                label,
            ]
            for i, (premise, hypothesis, label) in enumerate(rows)
        ],
    )


STSB_HEAD = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"]
MRPC_HEAD = ["\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"]  # the GLUE download keeps a BOM
NLI_HEAD = ["index", "sentence1", "sentence2", "label"]
QQP_HEAD = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
QUOTED = 'Amrozi called him " the witness .'  # an unbalanced quote, as in real GLUE text

# Folder -> file -> text, in the formats of the GLUE download (download_glue_data.py).
GLUE_FILES = {
    "CoLA": {  # no header: source, label, original label, sentence
        "train.tsv": _tsv(["gj04", "1", "", "Our friends won't buy this."], ["gj04", "0", "*", 'They drank "dry.']),
        "dev.tsv": _tsv(["bc01", "1", "", "The sailors rode the breeze."]),
    },
    "SST-2": {
        "train.tsv": _tsv(["sentence", "label"], ["hide new secretions ", "0"], ["null ", "1"]),
        "dev.tsv": _tsv(["sentence", "label"], ["a charming journey . ", "1"]),
    },
    "MRPC": {
        "train.tsv": _tsv(
            MRPC_HEAD,
            ["1", "702876", "702977", QUOTED, "He said so ."],
            ["0", "2108705", "2108831", "Yucaipa owned it .", "Yucaipa sold it ."],
        ),
        "dev.tsv": _tsv(MRPC_HEAD, ["1", "1", "2", "He said .", "He stated ."]),
    },
    "STS-B": {
        "train.tsv": _tsv(
            STSB_HEAD,
            [
                "0",
                "main-captions",
                "MSRvid",
                "2012test",
                "0001",
                "none",
                "none",
                "A plane is taking off.",
                "An air plane is taking off.",
                "5.000",
            ],
            [
                "1",
                "main-captions",
                "MSRvid",
                "2012test",
                "0004",
                "none",
                "none",
                "A man plays a flute.",
                "A man is playing a flute.",
                "3.800",
            ],
        ),
        "dev.tsv": _tsv(
            STSB_HEAD,
            [
                "0",
                "main-captions",
                "MSRvid",
                "2012test",
                "0000",
                "none",
                "none",
                "A man is dancing.",
                "A man with a hat is dancing.",
                "4.250",
            ],
        ),
    },
    "MNLI": {
        "train.tsv": _mnli(
            ("Cream skimming has two dimensions.", "Product is key.", "neutral"),
            ("you know during the season", "You lose the things.", "entailment"),
        ),
        "dev_matched.tsv": _mnli(("The new rights are nice.", "Everyone hates them.", "contradiction"), dev=True),
        "dev_mismatched.tsv": _mnli(
            ("Your gift is appreciated.", "Hundreds give.", "neutral"),
            ("Yes, it is.", "It is.", "entailment"),
            dev=True,
        ),
    },
    "QNLI": {
        "train.tsv": _tsv(
            ["index", "question", "sentence", "label"],
            ["0", "What came into force?", "The law came in 1998.", "not_entailment"],
        ),
        "dev.tsv": _tsv(["index", "question", "sentence", "label"], ["0", "What is it?", "A cat.", "entailment"]),
    },
    "RTE": {
        "train.tsv": _tsv(
            NLI_HEAD,
            ["0", "No Weapons Found in Iraq Yet.", "Weapons Found in Iraq.", "not_entailment"],
            ["1", "A place of sorrow.", "A place.", "entailment"],
        ),
        "dev.tsv": _tsv(NLI_HEAD, ["0", "Dana Reeve died.", "Reeve had an accident.", "not_entailment"]),
    },
    "QQP": {
        "train.tsv": _tsv(QQP_HEAD, ["133273", "213221", "213222", "How is the life?", "How is life?", "1"]),
        "dev.tsv": _tsv(QQP_HEAD, ["201359", "303345", "303346", "Why?", "Why not?", "0"]),
    },
    "WNLI": {
        "train.tsv": _tsv(NLI_HEAD, ["0", "I stuck a pin through a carrot.", "The carrot had a hole.", "1"]),
        "dev.tsv": _tsv(NLI_HEAD, ["0", "The drain is clogged.", "The hair is clogged.", "0"]),
    },
}

# task -> (train rows as (text fields..., label) in nyu-mll/glue label ids, validation labels)
EXPECTED = {
    "cola": ([("Our friends won't buy this.", 1), ('They drank "dry.', 0)], [1]),
    "sst2": ([("hide new secretions ", 0), ("null ", 1)], [1]),  # "null" stays text
    "mrpc": ([(QUOTED, "He said so .", 1), ("Yucaipa owned it .", "Yucaipa sold it .", 0)], [1]),
    "stsb": (
        [
            ("A plane is taking off.", "An air plane is taking off.", 5.0),
            ("A man plays a flute.", "A man is playing a flute.", 3.8),
        ],
        [4.25],
    ),
    "mnli": (
        [
            ("Cream skimming has two dimensions.", "Product is key.", 1),
            ("you know during the season", "You lose the things.", 0),
        ],
        [2],
    ),
    "mnli-mm": (
        [
            ("Cream skimming has two dimensions.", "Product is key.", 1),
            ("you know during the season", "You lose the things.", 0),
        ],
        [1, 0],
    ),
    "qnli": ([("What came into force?", "The law came in 1998.", 1)], [0]),
    "rte": (
        [("No Weapons Found in Iraq Yet.", "Weapons Found in Iraq.", 1), ("A place of sorrow.", "A place.", 0)],
        [1],
    ),
    "qqp": ([("How is the life?", "How is life?", 1)], [0]),
    "wnli": ([("I stuck a pin through a carrot.", "The carrot had a hole.", 1)], [0]),
}


@pytest.fixture
def glue_dir(tmp_path):
    """A GLUE root folder as written by the GLUE download script."""
    for folder, files in GLUE_FILES.items():
        (tmp_path / folder).mkdir()
        for name, text in files.items():
            (tmp_path / folder / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("name", list(EXPECTED))
def test_local_glue_tsv_matches_hub_columns_and_label_ids(glue_dir, name):
    task = tasks.get_task(name)
    splits = tasks.load_splits(name, data_dir=glue_dir)
    train_rows, validation_labels = EXPECTED[name]
    for split in splits.values():
        assert split.column_names == [*task.text_fields, "label", "idx"]
    train = splits["train"]
    assert list(zip(*(train[field] for field in task.text_fields))) == [row[:-1] for row in train_rows]
    assert train["label"] == pytest.approx([row[-1] for row in train_rows])  # float32 for stsb
    assert train["idx"] == list(range(len(train_rows)))
    assert splits["validation"]["label"] == pytest.approx(validation_labels)
    assert splits["test"]["label"] == splits["validation"]["label"]  # GLUE test labels are hidden


def test_label_dtypes(glue_dir):
    assert tasks.load_splits("stsb", data_dir=glue_dir)["train"].features["label"].dtype == "float32"
    assert tasks.load_splits("cola", data_dir=glue_dir)["train"].features["label"].dtype == "int64"


def test_local_glue_accepts_the_task_folder_itself(glue_dir):
    splits = tasks.load_splits("rte", data_dir=glue_dir / "RTE")
    assert len(splits["train"]) == 2


def test_local_glue_missing_dir_or_file_names_the_path(glue_dir):
    with pytest.raises(TaskError, match="nowhere"):
        tasks.load_splits("rte", data_dir=glue_dir / "nowhere")
    (glue_dir / "RTE" / "dev.tsv").unlink()
    with pytest.raises(TaskError, match=r"RTE/dev\.tsv"):
        tasks.load_splits("rte", data_dir=glue_dir)


def test_local_glue_empty_labelless_or_unknown_labels(glue_dir):
    (glue_dir / "SST-2" / "dev.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(TaskError, match=r"'sst2'.*validation split is empty"):
        tasks.load_splits("sst2", data_dir=glue_dir)
    (glue_dir / "RTE" / "train.tsv").write_text("index\tsentence1\tsentence2\n0\ta\tb\n")  # like test.tsv
    with pytest.raises(TaskError, match=r"'rte'.*train\.tsv lacks .*\['label'\]"):
        tasks.load_splits("rte", data_dir=glue_dir)
    (glue_dir / "QNLI" / "dev.tsv").write_text("index\tquestion\tsentence\tlabel\n0\tq\ts\tmaybe\n")
    with pytest.raises(TaskError, match="'maybe'"):
        tasks.load_splits("qnli", data_dir=glue_dir)


# --- GLUE from the hub (load_dataset replaced by an in-memory nyu-mll/glue lookalike) ---------


def _fake_glue(validation_labels):
    def load_dataset(path, config):
        assert (path, config) == ("nyu-mll/glue", "mnli")
        features = datasets.Features(
            {
                "premise": datasets.Value("string"),
                "hypothesis": datasets.Value("string"),
                "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),
                "idx": datasets.Value("int32"),
            }
        )

        def split(labels):
            n = len(labels)
            rows = {
                "premise": [f"p{i}" for i in range(n)],
                "hypothesis": [f"h{i}" for i in range(n)],
                "label": labels,
                "idx": list(range(n)),
            }
            return datasets.Dataset.from_dict(rows, features=features)

        return datasets.DatasetDict(
            train=split([0, 1, 2, 0]),
            validation_matched=split([2]),
            validation_mismatched=split(validation_labels),
            test_matched=split([-1]),
            test_mismatched=split([-1]),
        )

    return load_dataset


def test_hub_glue_is_canonicalised_like_local_files(monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", _fake_glue([1, 0]))
    splits = tasks.load_splits("mnli-mm")
    assert splits["validation"]["label"] == [1, 0] and splits["test"]["label"] == [1, 0]
    assert splits["train"].features == tasks._features(tasks.get_task("mnli"))
    assert tasks.load_splits("mnli")["validation"]["label"] == [2]


def test_hub_split_without_labels_is_an_error(monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", _fake_glue([-1, -1]))
    with pytest.raises(TaskError, match=r"'mnli-mm'.*validation split has no labels"):
        tasks.load_splits("mnli-mm")


# --- metrics ----------------------------------------------------------------------------------

PRED = np.array([1, 1, 0, 0, 1, 0])
GOLD = np.array([1, 0, 0, 1, 1, 0])  # TP=2 FP=1 FN=1 TN=2


def test_binary_metrics_against_hand_computed_values():
    assert metrics.accuracy(PRED, GOLD) == pytest.approx(4 / 6)
    assert metrics.f1_score(PRED, GOLD) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    # (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (4 - 1) / sqrt(3^4)
    assert metrics.matthews_corrcoef(PRED, GOLD) == pytest.approx(1 / 3)
    assert metrics.matthews_corrcoef(GOLD, GOLD) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef(1 - GOLD, GOLD) == pytest.approx(-1.0)


def test_degenerate_metrics_are_zero():
    zeros = np.zeros(4, dtype=int)
    assert metrics.f1_score(zeros, zeros) == 0.0
    assert metrics.matthews_corrcoef(zeros, np.array([0, 1, 0, 1])) == 0.0
    assert metrics.pearson(np.full(3, 2.0), np.array([1.0, 2.0, 3.0])) == 0.0
    assert metrics.spearman(np.full(3, 2.0), np.array([1.0, 2.0, 3.0])) == 0.0


def test_multiclass_mcc_against_hand_computed_value():
    # confusion rows (true) [[2,0,0],[0,0,1],[0,0,1]]: t=[2,1,1], p=[2,0,2], c=3, s=4
    # (3*4 - (4+0+2)) / sqrt((16-8)(16-6)) = 6 / sqrt(80)
    value = metrics.matthews_corrcoef(np.array([0, 2, 2, 0]), np.array([0, 1, 2, 0]))
    assert value == pytest.approx(6 / np.sqrt(80))


def test_correlations_against_hand_computed_values():
    x = np.array([1.0, 2.0, 3.0])
    # deviations [-1,0,1] and [-4/3,-1/3,5/3]: 3 / (sqrt(2) sqrt(42)/3) = 9 / sqrt(84)
    assert metrics.pearson(x, np.array([1.0, 2.0, 4.0])) == pytest.approx(9 / np.sqrt(84))
    # rank differences [-2,1,1]: 1 - 6*6 / (3*(9-1)) = -0.5
    assert metrics.spearman(x, np.array([3.0, 1.0, 2.0])) == pytest.approx(-0.5)


def test_compute_metrics_returns_the_task_metrics():
    assert metrics.compute_metrics("mrpc", PRED, GOLD) == pytest.approx({"f1": 2 / 3, "accuracy": 2 / 3})
    assert set(metrics.compute_metrics("stsb", np.array([0.1, 0.5, 0.2]), np.array([1.0, 4.0, 2.0]))) == {
        "pearson",
        "spearman",
    }
    with pytest.raises(ValueError):
        metrics.compute_metrics("rte", PRED, GOLD[:3])


def test_majority_baseline():
    assert metrics.majority_baseline("mrpc", np.array([1, 1, 0])) == pytest.approx(2 * 2 / (2 * 2 + 1))
    assert metrics.majority_baseline("sst2", np.array([0, 0, 1]), np.array([1, 1, 0, 0])) == 0.5
    assert metrics.majority_baseline("cola", np.array([1, 1, 0])) == 0.0
    assert metrics.majority_baseline("qqp", np.array([0, 0, 1])) == 0.0
    assert metrics.majority_baseline("stsb", np.array([1.0, 2.5, 4.0])) == 0.0


# --- task text --------------------------------------------------------------------------------


def test_task_texts_flattens_pairs_into_sentences(glue_dir):
    rte = tasks.load_splits("rte", data_dir=glue_dir)["train"]
    assert tasks.task_texts(rte, "rte") == [
        "No Weapons Found in Iraq Yet.",
        "Weapons Found in Iraq.",
        "A place of sorrow.",
        "A place.",
    ]
    polarity = tasks.load_splits("polarity")["test"]
    assert tasks.task_texts(polarity, "polarity") == polarity["sentence"]

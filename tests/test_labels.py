"""Labels of one type, no None, and None records named (issue 32, item 12)."""
import re

import numpy as np
import pytest

from onlinepgs import PGSClassifier

X = np.array([[1.0, 0.0], [0.0, 1.0]] * 3)


@pytest.mark.parametrize("y, match", [
    (["a", 1] * 3, r"y mixes strings and numbers \(row 0: 'a', row 1: 1\)"),
    (np.array([2, "b"] * 3, dtype=object), r"y mixes strings and numbers \(row 0: 2, row 1: 'b'\)"),
    ([1, 2, 1, 2, None, 2], r"y contains None \(row 4\)"),
    (["a", "b", None, "b", "a", "b"], r"y contains None \(row 2\)"),
    ([None] * 6, r"y contains None \(row 0\)"),
])
def test_mixed_or_missing_labels_are_value_errors(y, match):
    for train in (lambda est: est.fit(X, y),
                  lambda est: est.partial_fit(X, y, classes=[1, 2])):
        with pytest.raises(ValueError, match=match):
            train(PGSClassifier())
    # a stream's records are counted from 1
    in_stream = re.sub(r"row (\d)", lambda m: f"record {int(m.group(1)) + 1} of the stream",
                       match)
    with pytest.raises(ValueError, match=in_stream):
        PGSClassifier().fit_stream(zip([{0: 1.0}] * 6, y), classes=[1, 2])


def test_labels_keep_their_type():
    # before, ["a", 1] trained silently on the strings "1" and "a": predict gave "1"
    est = PGSClassifier(sigma=1e-2, random_state=0).fit(X, [3, 1] * 3)
    assert est.predict(X[:2]).tolist() == [3, 1]
    with pytest.raises(ValueError, match=r"y mixes strings and numbers \(row 0: 3, row 1: 'x'\)"):
        est.partial_fit(X, [3, "x"] * 3)
    assert est.classes_.tolist() == [1, 3]  # unchanged
    text = PGSClassifier(sigma=1e-2, random_state=0).fit(X, np.array(["u", "v"] * 3, dtype=object))
    assert text.predict(X[:2]).tolist() == ["u", "v"]


def test_mixed_classes_are_named_by_entry():
    with pytest.raises(ValueError, match=r"classes mixes strings and numbers \(entry 0: 1, "
                                         r"entry 1: 'a'\)"):
        PGSClassifier().partial_fit(X, [1, 2] * 3, classes=[1, "a"])
    with pytest.raises(ValueError, match=r"classes contains None \(entry 1\)"):
        PGSClassifier().partial_fit(X, [1, 2] * 3, classes=[1, None, 2])


@pytest.mark.parametrize("records, row", [
    ([None, {"w": 1.0}], 0), ([{"w": 1.0}, None], 1), ([[("w", 1.0)], None], 1),
    ([None], 0), ([[], None], 1),
])
def test_a_none_record_is_named(records, row):
    labels = [0, 1][:len(records)]
    with pytest.raises(ValueError, match=rf"^row {row} is None: expected a dict "
                                         r"\{feature: value\} or a sequence of \(feature, "
                                         r"value\) pairs$"):
        PGSClassifier(n_bits=4).partial_fit(records, labels, classes=[0, 1])
    with pytest.raises(ValueError, match=rf"^record {row + 1} of the stream is None"):
        PGSClassifier(n_bits=4).fit_stream(zip(records, labels), classes=[0, 1])
    est = PGSClassifier(n_bits=4).fit([{"w": 1.0}, {"v": 1.0}], [0, 1])
    with pytest.raises(ValueError, match=rf"^row {row} is None"):
        est.predict(records)


def test_a_stray_label_beside_minus_one_and_one_is_refused_at_its_line(tmp_path, capsys):
    """A +-1 file with one stray 0 in its first chunk silently trained a 3-class model
    (the classes come from the first chunk's labels). The command stops at the stray
    label's line, naming the option that makes it legitimate; with --classes (or
    classes= in Python) the K classes train; labels 0..2 are no binary file's and train."""
    from onlinepgs import load_model
    from onlinepgs.cli import main
    from onlinepgs.pgs import PGSClassifierLearner
    from onlinepgs.streaming import StrayLabelError, train_stream

    rows = [f"{1 if i % 3 else -1} {1 + i % 5}:1 {7 + i % 2}:0.5" for i in range(60)]
    rows[40] = "0 2:1"
    data = tmp_path / "d.svm"
    data.write_text("\n".join(rows) + "\n")
    assert main(["train", str(data), "-o", str(tmp_path / "m.pgs"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{data}:41: label 0 beside -1 and 1" in err
    assert "--classes -1,0,1" in err and not (tmp_path / "m.pgs").exists()
    assert main(["train", str(data), "-o", str(tmp_path / "m.pgs"), "--quiet",
                 "--classes", "-1,0,1"]) == 0
    assert load_model(tmp_path / "m.pgs").classes_.tolist() == [-1, 0, 1]
    with pytest.raises(StrayLabelError) as info:
        train_stream(PGSClassifierLearner(), [str(data)])
    assert str(info.value.line) == "41"
    three = tmp_path / "three.svm"
    three.write_text("0 1:1\n1 2:1\n2 3:1\n")
    assert main(["train", str(three), "-o", str(tmp_path / "t.pgs"), "--quiet"]) == 0

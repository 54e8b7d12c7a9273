"""The rules about options (onlinepgs/_options.py) are asked before any data is read.

The yardstick is the data itself: the command is given a DATA path that does not exist,
so a rule found after opening it would end in "no such file" (exit 1) instead of the
rule's own usage error (exit 2); the estimators are given an X that fails when read.
"""
import pytest

from onlinepgs import PGSClassifier, PGSRegressor, SDCAClassifier
from onlinepgs.cli import main


@pytest.mark.parametrize("args, words", [
    (["--l1", "0.1", "--p", "1.5", "--iterate", "average"],
     "argument --iterate: --l1 0.1 with --p 1.5 < 2 keeps only the last iterate, not "
     "--iterate average; use --iterate last (or --p 2)"),
    (["--geometry", "adaptive", "--forget", "0.9", "--iterate", "weighted2"],
     "argument --forget: the adaptive geometry forgets (--forget 0.9) with the last "
     "iterate only, got --iterate weighted2"),
    (["--l1", "0.1", "--scheduler", "threads"],
     "argument --l1: --scheduler does not train an l_1 term (--l1 0.1)"),
    (["--forget", "0.9", "--scheduler", "threads"],
     "argument --forget: --scheduler does not forget (--forget 0.9)"),
    (["--class-weight", "balanced", "--scheduler", "threads"],
     "argument --class-weight: --scheduler does not weigh classes"),
    (["--holdout-every", "5", "--scheduler", "threads"],
     "argument --holdout-every: not available with --scheduler"),
    (["--solver", "sdca", "--l1", "0.1", "--p", "1.5"],
     "argument --l1: --solver sdca with an l_1 term (--l1 0.1) needs --p 2 (Prox-SDCA)"),
    (["--solver", "sdca", "--sigma", "auto"],
     "argument --sigma: --sigma auto races PGS runs over a stream; --solver sdca needs a "
     "number"),
    (["--solver", "sdca", "--radius", "1"], "argument --radius: a PGS option"),
    (["--multi-class", "multinomial", "--loss", "hinge"],
     "argument --multi-class: --multi-class multinomial needs --loss logistic, got "
     "--loss hinge"),
    (["--classes", "1,2", "--loss", "squared"],
     "argument --classes: applies to classification losses only"),
    (["--audit"], "argument --audit: needs -o MODEL"),
    (["--l1", "-1"], "argument --l1 must be a float in the range [0, inf). Got -1.0"),
    (["--p", "1.00000001"], "argument --p: --p 1.00000001 is too close to 1"),
    # options that would change nothing: refused, not dropped without a word
    (["--solver", "sdca", "--sigma", "1e-3", "--geometry", "adaptive"],
     "argument --geometry: a PGS option"),
    (["--eta", "0.1"], "argument --eta: the adaptive geometry's base rate"),
    (["--no-header"], "argument --no-header: applies to csv or tsv input"),
    (["--epsilon", "0.3"], "argument --epsilon: the width of the huber and "
                           "epsilon_insensitive losses; the loss here is the default --loss "
                           "logistic"),
    (["--hash-seed", "3"], "argument --hash-seed: seeds the hashing of features, which "
                           "svmlight input without --bits does not do"),
    (["--no-intercept", "--intercept-scaling", "2"],
     "argument --intercept-scaling: the value of the intercept's feature, which "
     "--no-intercept leaves out"),
])
def test_the_command_refuses_options_before_opening_data(tmp_path, capsys, args, words):
    missing = tmp_path / "missing.svm"
    assert main(["train", str(missing), *args]) == 2
    err = capsys.readouterr().err
    assert words in err, err
    assert "no such file" not in err and err.count("\n") == 1


class _Unreadable:
    """An X whose every read fails: a learner that reads it before its rules refuse."""
    shape = (2, 2)

    def __array__(self, *args, **kwargs):
        raise AssertionError("X was read before the options were checked")

    def __len__(self):
        raise AssertionError("X was read before the options were checked")


@pytest.mark.parametrize("est, words", [
    (PGSClassifier(l1=0.1, p=1.5, iterate="average"),
     "PGSClassifier: l1=0.1 with p=1.5 < 2 keeps only the last iterate"),
    (PGSClassifier(multi_class="crammer_singer", loss="logistic"),
     "multi_class='crammer_singer' needs loss='hinge'"),
    (PGSRegressor(l1=-1.0), "The 'l1' parameter of PGSRegressor must be a float in the "
                            "range [0"),
    (SDCAClassifier(l1=0.1, p=1.5), "needs p=2 (Prox-SDCA)"),
])
def test_estimators_refuse_options_before_reading_X(est, words):
    # the scikit-learn layer's range errors are scikit-learn's InvalidParameterError
    with pytest.raises(ValueError) as refused:
        est.fit(_Unreadable(), [0, 1])
    assert words in str(refused.value)

"""Train from a file on the command line, then predict and evaluate: the main job, on real data.

Run:  python examples/quickstart.py [--out DIR] [--p 1.8] [--sigma 1e-3] [--passes 2]

The data ship with the package (``onlinepgs.datasets``: a9a, the UCI Adult census data
binarized by LIBSVM's authors; 32,561 training and 16,281 test rows, 123 features), so
nothing is downloaded. The script runs the three commands a user would type,

    onlinepgs train TRAIN -o model.pgs      (prints the progressive-validation table)
    onlinepgs predict model.pgs TEST -o predictions.txt
    onlinepgs eval model.pgs TEST

each as a subprocess of this interpreter (``python -m onlinepgs.cli``, the same program
as the ``onlinepgs`` command), and writes the model and the predictions to ``--out``
(default: a temporary directory, removed at the end).
"""
import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onlinepgs.datasets import a9a_path


def onlinepgs(*args, capture=False):
    """Run one ``onlinepgs`` command, echoing it as a user would type it; stop on failure."""
    print("$ onlinepgs " + " ".join(shlex.quote(str(a)) for a in args), flush=True)
    proc = subprocess.run([sys.executable, "-m", "onlinepgs.cli", *map(str, args)],
                          text=True, capture_output=capture)
    if proc.returncode != 0:
        sys.exit(f"quickstart: 'onlinepgs {args[0]}' failed with exit code {proc.returncode}"
                 + (f": {proc.stderr.strip()}" if capture else ""))
    return proc.stdout


def run(out, args):
    """Train on a9a's training file, write predictions for its test file, evaluate them."""
    train, test = a9a_path("train"), a9a_path("test")
    model, predictions = out / "model.pgs", out / "predictions.txt"
    start = time.perf_counter()
    onlinepgs("train", train, "-o", model, "--loss", "logistic", "--p", args.p,
              "--sigma", args.sigma, "--passes", args.passes)
    print()
    onlinepgs("predict", model, test, "-o", predictions)
    labels = predictions.read_text().split()
    print(f"{len(labels)} predicted labels in {predictions}, the first five: {labels[:5]}\n")
    metrics = onlinepgs("eval", model, test, capture=True)
    print(metrics)
    print(f"train + predict + eval took {time.perf_counter() - start:.1f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for model.pgs and predictions.txt (kept)")
    parser.add_argument("--p", default="2", help="norm of the regularizer, in (1, 2]")
    parser.add_argument("--sigma", default="auto",
                        help="regularization weight, or auto (the default: chosen while training)")
    parser.add_argument("--passes", default="1", help="passes over the training file")
    args = parser.parse_args()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        run(args.out, args)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            run(Path(tmp), args)


if __name__ == "__main__":
    main()

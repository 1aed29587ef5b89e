"""A tiny, real training run over the canonical stream, with its step hash chain.

A byte-level bigram model (embedding 257 x 16, output 16 x 257) in NumPy, trained with
Adam on the windows `StreamReader` gives it, step by step, as a world of 2 ranks would
read them. Its arithmetic gives the same bits on every CPU (sums in a fixed order, no
BLAS, `exp` and `log` from basic operations), so its chain does too. Gradients are
clipped to a norm of CLIP; a pre-clip norm above SKIP skips the step and the next four
(the rule of a published auditable run, with a threshold for this model), and the chain
header declares that rule so `lineage chain verify` checks every
step against it. Each step is appended to a lineage-chain/2 step log (tensors digested,
batch digests from the reader); every CHECKPOINT_EVERY steps (declared too) the weights
go to model.safetensors and the optimizer moments and clipped gradients, under their
chain names, to optimizer/state.safetensors. The chain is closed at the end. `replay`
runs one step again from a checkpoint, for `lineage audit replay`:

    lineage audit replay tiny --step 50 --replayer examples/tiny_run.py:replay

    python examples/tiny_run.py --store demo-store --stream main --steps 200 --out run-out
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

import lineage
from lineage.runs.chain import GRADIENTS_PREFIX, OPTIMIZER_PREFIX, WEIGHTS_PREFIX, ChainWriter
from lineage.runs.skip_rule import SkipRule, SkipTracker
from lineage.stream.reader import SEPARATOR, StreamReader

VOCAB = SEPARATOR + 1
DIM = 16
WORLD_SIZE = 2
LR = 0.05
CLIP = 0.3
SKIP = 0.55
SKIP_AFTER = 4
CHECKPOINT_EVERY = 50
SEED = 42


def init_weights(seed: int = SEED) -> dict[str, np.ndarray]:
    rng = np.random.Generator(np.random.Philox(seed))  # counter-based: same on every machine
    return {"embed": (rng.standard_normal((VOCAB, DIM)) * 0.1).astype(np.float32),
            "out": (rng.standard_normal((DIM, VOCAB)) * 0.1).astype(np.float32)}


def loss_and_grads(w: dict[str, np.ndarray], windows: list) -> tuple[float, dict[str, np.ndarray]]:
    """The batch's mean cross-entropy of each next token and its gradients.

    A bigram model's logits depend only on the previous token, so everything follows
    from the batch's bigram counts: the same numbers as token by token, but computed in
    float64 with every sum in a fixed order (`_dot`, `math.fsum`) and `exp`/`log` from
    + - * / alone, so the same bits come out on every CPU (BLAS matmuls and numpy's SIMD
    `exp` round differently from one CPU to another, and the chain would too)."""
    tokens = np.concatenate([np.frombuffer(win, dtype=np.uint16) for win in windows])
    x, y = tokens[:-1].astype(np.int64), tokens[1:].astype(np.int64)
    pairs = np.bincount(x * VOCAB + y, minlength=VOCAB * VOCAB).reshape(VOCAB, VOCAB)
    seen = pairs.sum(axis=1).astype(np.float64)[:, None]      # exact: integers
    pairs = pairs.astype(np.float64)
    embed, out = w["embed"].astype(np.float64), w["out"].astype(np.float64)
    logits = _dot(embed, out)                                # (VOCAB, VOCAB): after each token
    logits -= logits.max(axis=1, keepdims=True)
    probs = _exp(logits)
    probs /= np.array([math.fsum(row) for row in probs])[:, None]
    loss = math.fsum((pairs * -_log(probs + 1e-12)).ravel()) / len(x)
    grad_logits = (seen * probs - pairs) / len(x)            # summed over each token's uses
    grad_out = _dot(embed.T, grad_logits)
    grad_embed = _dot(grad_logits, out.T)
    return loss, {"embed": grad_embed.astype(np.float32), "out": grad_out.astype(np.float32)}


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with each element's terms added in index order (a product, then an add)."""
    total = np.zeros((a.shape[0], b.shape[1]))
    for j in range(a.shape[1]):
        total += a[:, j, None] * b[None, j, :]
    return total


def _exp(x: np.ndarray) -> np.ndarray:
    """exp of float64 values: 2^k * exp(r), |r| <= ln2/2, a degree-13 Taylor polynomial."""
    k = np.rint(x * 1.4426950408889634)
    r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
    poly = np.full_like(r, 1 / math.factorial(13))
    for i in range(12, -1, -1):
        poly = poly * r + 1 / math.factorial(i)
    return np.ldexp(poly, k.astype(np.int64))


def _log(x: np.ndarray) -> np.ndarray:
    """log of positive float64 values: e*ln2 + 2*atanh((m-1)/(m+1)), m in [sqrt(1/2), sqrt 2)."""
    m, e = np.frexp(x)
    low = m < 0.7071067811865476
    m, e = np.where(low, m * 2, m), np.where(low, e - 1, e)
    f = (m - 1) / (m + 1)
    s = f * f
    series = np.full_like(s, 1 / 25)
    for i in range(11, -1, -1):
        series = series * s + 1 / (2 * i + 1)
    return e * 6.93147180369123816490e-01 + (2 * f * series + e * 1.90821492927058770002e-10)


def clip_gradients(grads: dict[str, np.ndarray],
                   clip: float) -> tuple[float, bool, dict[str, np.ndarray]]:
    """The pre-clip global norm, whether it was clipped, and the gradients after."""
    norm = math.sqrt(math.fsum(float(v) for g in grads.values()
                               for v in (g.astype(np.float64) ** 2).ravel()))
    if norm > clip:
        grads = {k: (g * (clip / norm)).astype(np.float32) for k, g in grads.items()}
    return norm, norm > clip, grads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="demo-store")
    parser.add_argument("--stream", default="main")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("run-out"))
    parser.add_argument("--checkpoint-every", type=int, default=CHECKPOINT_EVERY,
                        help="steps between checkpoints (the interval audits confirm)")
    args = parser.parse_args()
    steps = train(lineage.open(args.store), args.stream, steps=args.steps, out=args.out,
                  checkpoint_every=args.checkpoint_every)
    print(f"wrote {args.out / 'steps.jsonl'} ({steps} steps, closed) and checkpoints in "
          f"{args.out}")


def train(store: lineage.Store, stream: str, *, steps: int, out: Path, skip_above: float = SKIP,
          checkpoint_every: int = CHECKPOINT_EVERY) -> int:
    """Train, log the chain, save checkpoints; returns the number of steps run."""
    reader = StreamReader(store, stream)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "steps.jsonl"
    log.unlink(missing_ok=True)
    config = {"model": "bigram-bytes", "dim": DIM, "lr": LR, "clip": CLIP, "seed": SEED,
              "optimizer": "adam"}
    rule = SkipRule(grad_norm_above=skip_above, skip_following=SKIP_AFTER)
    chain = ChainWriter(log, config=config, stream=reader.info, world_size=WORLD_SIZE,
                        skip_rule=rule, checkpoint_every=checkpoint_every)
    weights = init_weights()
    moments = {f"{k}.{m}": np.zeros_like(v) for k, v in weights.items() for m in ("m", "v")}
    tracker = SkipTracker(rule)
    total = min(steps, int(reader.info["steps"]))
    for step in range(total):
        loss, grads = loss_and_grads(weights, reader.windows(step))
        norm, clipped, grads = clip_gradients(grads, CLIP)
        skipped = tracker.decide(step, norm)
        if not skipped:
            adam(weights, grads, moments, step + 1)
        chain.append(step, weights=weights, optimizer=moments, gradients=grads,
                     batch_digests=reader.batch_digests(step, WORLD_SIZE), loss=loss,
                     grad_norm=norm, lr=LR, clipped=clipped, skipped=skipped,
                     rng={"seed": SEED, "counter": 0})
        if (step + 1) % checkpoint_every == 0:
            save_checkpoint(out / f"checkpoint-{step}", step, weights, moments, grads)
    chain.close()
    return total


def save_checkpoint(folder: Path, step: int, weights: dict[str, np.ndarray],
                    moments: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
    """Weights for anyone; optimizer state (named as in the chain) for a replay."""
    folder.mkdir(exist_ok=True)
    save_file(weights, str(folder / "model.safetensors"), metadata={"step": str(step)})
    state = {OPTIMIZER_PREFIX + k: v for k, v in moments.items()}
    state |= {GRADIENTS_PREFIX + k: v for k, v in grads.items()}
    (folder / "optimizer").mkdir(exist_ok=True)
    save_file(state, str(folder / "optimizer" / "state.safetensors"),
              metadata={"step": str(step)})


def adam(w: dict[str, np.ndarray], g: dict[str, np.ndarray], m: dict[str, np.ndarray],
         t: int, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, lr: float = LR) -> None:
    for k in w:
        m[f"{k}.m"] = (b1 * m[f"{k}.m"] + (1 - b1) * g[k]).astype(np.float32)
        m[f"{k}.v"] = (b2 * m[f"{k}.v"] + (1 - b2) * g[k] * g[k]).astype(np.float32)
        m_hat = m[f"{k}.m"] / (1 - _power(b1, t))
        v_hat = m[f"{k}.v"] / (1 - _power(b2, t))
        w[k] = (w[k] - lr * m_hat / (np.sqrt(v_hat) + eps)).astype(np.float32)


def _power(base: float, exponent: int) -> float:
    """base ** exponent by repeated multiplication (a float ** goes to the C library's
    pow, which can differ in the last bit from one machine to another)."""
    result = 1.0
    for _ in range(exponent):
        result *= base
    return result


def replay(state: dict[str, np.ndarray], batch: list, *, step: int, record: dict,
           config: dict) -> dict:
    """One step again, for `lineage audit replay` (docs/audit-spec.md, "Replay protocol"):
    the state after step-1 under chain names ({} at step 0: the initial weights from the
    config's seed, zero moments), the step's windows and its chain inputs in; the state
    after the step, its loss, pre-clip norm and clipping out. It runs the same code as
    `train`, so an honest run's steps replay bit for bit."""
    if step == 0 and not state:
        weights = init_weights(int(config["seed"]))
        moments = {f"{k}.{m}": np.zeros_like(v) for k, v in weights.items() for m in ("m", "v")}
    else:
        weights = _under(state, WEIGHTS_PREFIX)
        moments = _under(state, OPTIMIZER_PREFIX)
    loss, grads = loss_and_grads(weights, batch)
    norm, clipped, grads = clip_gradients(grads, float(config["clip"]))
    if not record["skipped"]:
        adam(weights, grads, moments, step + 1, lr=float(record["lr"]))
    out: dict = {WEIGHTS_PREFIX + k: v for k, v in weights.items()}
    out |= {OPTIMIZER_PREFIX + k: v for k, v in moments.items()}
    out |= {GRADIENTS_PREFIX + k: v for k, v in grads.items()}
    return out | {"loss": loss, "grad_norm": norm, "clipped": clipped}


def _under(state: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix):]: v.copy() for k, v in state.items() if k.startswith(prefix)}


if __name__ == "__main__":
    main()

"""A tiny, real training run over the canonical stream, with its step hash chain.

A byte-level bigram model (embedding 257 x 16, output 16 x 257) in NumPy, trained with
Adam on the windows `StreamReader` gives it, step by step, as a world of 2 ranks would
read them. Gradients are clipped to a norm of CLIP; a pre-clip norm above SKIP skips the
step and the next four (the rule of a published auditable run, with a threshold for this
model), and the chain header declares that rule so `lineage chain verify` checks every
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
    tokens = np.concatenate([np.frombuffer(win, dtype=np.uint16) for win in windows])
    x, y = tokens[:-1].astype(np.int64), tokens[1:].astype(np.int64)
    hidden = w["embed"][x]                                   # (n, DIM)
    logits = hidden @ w["out"]                               # (n, VOCAB)
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    loss = float(-np.log(probs[np.arange(len(y)), y] + 1e-12).mean())
    probs[np.arange(len(y)), y] -= 1.0
    probs /= len(y)
    grad_out = hidden.T @ probs
    grad_hidden = probs @ w["out"].T
    grad_embed = np.zeros_like(w["embed"])
    np.add.at(grad_embed, x, grad_hidden)
    return loss, {"embed": grad_embed.astype(np.float32), "out": grad_out.astype(np.float32)}


def clip_gradients(grads: dict[str, np.ndarray],
                   clip: float) -> tuple[float, bool, dict[str, np.ndarray]]:
    """The pre-clip global norm, whether it was clipped, and the gradients after."""
    norm = float(np.sqrt(sum(float((g.astype(np.float64) ** 2).sum())
                             for g in grads.values())))
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
        m_hat = m[f"{k}.m"] / (1 - b1**t)
        v_hat = m[f"{k}.v"] / (1 - b2**t)
        w[k] = (w[k] - lr * m_hat / (np.sqrt(v_hat) + eps)).astype(np.float32)


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

"""A notebook over the demo store: what the tiny run trained on, step by step.

Cells (`# %%`) run in Jupyter or VS Code as they are, or top to bottom as a script:

    python examples/notebook.py [STORE [OUTDIR]]    # defaults: demo-store, notebook-out

The store is the one `make demo` builds (examples/demo.sh): corpus "example", stream
"main" and the run "tiny" of examples/tiny_run.py. Everything is read through
`store.frame(name)`, polars LazyFrames over the store's tables, and each plot is saved
as a PNG in OUTDIR.
"""

# %% Open the store and find the run's stream
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files, not windows: the plots are saved as PNG
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

import lineage  # noqa: E402

RUN = "tiny"
BINS = 10  # step ranges in the source-share plot
ARGS = sys.argv[1:] if Path(sys.argv[0]).name == "notebook.py" else []  # not a kernel's
STORE = ARGS[0] if ARGS else "demo-store"
OUT = Path(ARGS[1] if len(ARGS) > 1 else "notebook-out")
OUT.mkdir(parents=True, exist_ok=True)
pl.Config(tbl_formatting="ASCII_MARKDOWN", tbl_hide_column_data_types=True,
          tbl_hide_dataframe_shape=True, tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=80)

store = lineage.open(STORE)
run = store.frame("runs").filter(pl.col("name") == RUN).collect().row(0, named=True)
stream = store.frame("streams").filter(pl.col("name") == run["stream"]).collect() \
    .row(0, named=True)
TOKENS_PER_STEP = stream["seq_len"] * stream["batch"]  # step s reads tokens [s*T, (s+1)*T)
steps = (store.frame("steps").filter(pl.col("run") == RUN)
         .select("step", "loss", "grad_norm", "clipped", "skipped").sort("step").collect())
LAST_STEP = steps["step"].max()
print(f"run {RUN}: {steps.height} steps (0..{LAST_STEP}) over stream {stream['name']} "
      f"({stream['spec']}, {stream['spec_hash']}), {TOKENS_PER_STEP} tokens a step")

# %% Each document occurrence cut at step boundaries: its tokens in every step it spans
T = TOKENS_PER_STEP
pieces = (
    store.frame("occurrences")
    .filter((pl.col("stream") == stream["name"]) & (pl.col("stream_start") < (LAST_STEP + 1) * T))
    .with_columns(step=pl.int_ranges(pl.col("stream_start") // T,
                                     (pl.col("stream_end") - 1) // T + 1))
    .explode("step")
    .filter(pl.col("step") <= LAST_STEP)
    .with_columns(tokens=pl.min_horizontal("stream_end", (pl.col("step") + 1) * T)
                  - pl.max_horizontal("stream_start", pl.col("step") * T))
    .select("step", "source", "doc_id", "epoch", "tokens")
)

# %% (a) Source shares over training steps: document tokens per source per step range
width = -(-(LAST_STEP + 1) // BINS)  # steps per range, rounded up
shares = (
    pieces.with_columns(first_step=pl.col("step") // width * width)
    .group_by("first_step", "source").agg(pl.col("tokens").sum())
    .with_columns(last_step=pl.min_horizontal(pl.col("first_step") + width - 1, LAST_STEP),
                  share=(pl.col("tokens") / pl.col("tokens").sum().over("first_step")))
    .select("first_step", "last_step", "source", "tokens", pl.col("share").round(6))
    .sort("first_step", "source")
    .collect()
)
print(f"\nsource shares of the document tokens, steps in ranges of {width}")
print(shares)
corpus = (store.frame("corpus_sources").filter(pl.col("corpus") == stream["corpus"])
          .select("source", "tokens", share=(pl.col("tokens") / pl.col("tokens").sum())
                  .round(6))
          .sort("source").collect())
print(f"\nthe corpus {stream['corpus']!r} as a whole")
print(corpus)

wide = shares.pivot("source", index=["first_step", "last_step"], values="share") \
    .sort("first_step")
sources = [c for c in wide.columns if c not in ("first_step", "last_step")]
wide = wide.with_columns(pl.col(sources).fill_null(0.0))  # a source absent from a range
labels = [f"{a}-{b}" for a, b in zip(wide["first_step"], wide["last_step"], strict=True)]
fig, ax = plt.subplots(figsize=(10, 4.5))
bottom = [0.0] * wide.height
for source in sources:
    ax.bar(labels, wide[source], bottom=bottom, label=source)
    bottom = [b + v for b, v in zip(bottom, wide[source], strict=True)]
ax.set(xlabel="steps", ylabel="share of document tokens", ylim=(0, 1),
       title=f"Sources over the steps of run {RUN}")
ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
ax.tick_params(axis="x", labelrotation=45)
fig.tight_layout()
fig.savefig(OUT / "source_shares.png", dpi=100)
plt.close(fig)

# %% (b) Loss against clipped and skipped steps
kinds = steps.with_columns(kind=pl.when(pl.col("skipped")).then(pl.lit("skipped"))
                           .when(pl.col("clipped")).then(pl.lit("clipped"))
                           .otherwise(pl.lit("applied")))
summary = (kinds.group_by("kind")
           .agg(steps=pl.len(), first_step=pl.col("step").min(),
                mean_loss=pl.col("loss").mean().round(4),
                mean_grad_norm=pl.col("grad_norm").mean().round(4))
           .sort("kind"))
print("\nsteps by what the run did with their update (skipped: not applied; clipped: "
      "applied after clipping)")
print(summary)

fig, ax = plt.subplots(figsize=(9, 4.5))
ax.plot(steps["step"], steps["loss"], color="0.3", linewidth=1, label="loss")
for kind, style in (("clipped", {"color": "tab:orange", "marker": "o"}),
                    ("skipped", {"color": "tab:red", "marker": "x"})):
    marked = kinds.filter(pl.col("kind") == kind)
    ax.scatter(marked["step"], marked["loss"], s=22, label=f"{kind} ({marked.height})",
               zorder=3, **style)
ax.set(xlabel="step", ylabel="loss", title=f"Loss of run {RUN}, clipped and skipped steps")
ax.legend(fontsize="small")
fig.tight_layout()
fig.savefig(OUT / "loss.png", dpi=100)
plt.close(fig)

# %% (c) Documents per step
per_step = (pieces.group_by("step").agg(documents=pl.len(), tokens=pl.col("tokens").sum())
            .sort("step").collect())
spread = per_step.group_by("documents").agg(steps=pl.len()).sort("documents")
print("\nsteps by how many documents they read")
print(spread)
print("\nthe steps with the most documents")
print(per_step.sort(["documents", "step"], descending=[True, False]).head(5))

fig, ax = plt.subplots(figsize=(9, 4.5))
ax.bar(per_step["step"], per_step["documents"], width=1.0, color="tab:blue")
ax.set(xlabel="step", ylabel="documents (or parts of them)",
       title=f"Documents per step, run {RUN} over stream {stream['name']}")
fig.tight_layout()
fig.savefig(OUT / "documents_per_step.png", dpi=100)
plt.close(fig)
print(f"\nplots in {OUT}/: source_shares.png, loss.png, documents_per_step.png")

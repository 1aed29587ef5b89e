"""What kind of network a folder holds, in one line, from config.json or GGUF metadata.

The kind decides whether running it keeps a KV cache: a decoder caches keys and values of
every past token; an encoder (BERT and its family, sentence embedders) attends over the
whole input at once and caches nothing between calls; a recurrent model (Mamba, RWKV) keeps
a fixed-size state instead. The kind is read from transformers' `is_decoder` /
`is_encoder_decoder` flags first, then the architecture class names, then `model_type`
(config.json) or `general.architecture` and `<arch>.attention.causal` (GGUF). An unknown
family is reported as unknown, and the memory estimate then assumes a decoder (the larger
cost) and says so.
"""

from __future__ import annotations

from typing import Any

from lineage.formats.hf_config import ModelConfig

# config.json model_type values of encoder-only families (sentence embedders such as e5,
# bge, gte and all-MiniLM use these types too).
HF_ENCODERS = frozenset({
    "albert", "bert", "big_bird", "camembert", "canine", "convbert", "data2vec-text",
    "deberta", "deberta-v2", "distilbert", "electra", "ernie", "ernie_m", "esm", "eurobert",
    "flaubert", "funnel", "ibert", "layoutlm", "layoutlmv2", "layoutlmv3", "longformer",
    "luke", "markuplm", "megatron-bert", "mobilebert", "modernbert", "mpnet", "neobert",
    "new", "nezha", "nomic_bert", "rembert", "roberta", "roberta-prelayernorm", "roformer",
    "splinter", "squeezebert", "xlm", "xlm-roberta", "xlm-roberta-xl", "xmod",
    "vit", "deit", "beit", "dinov2", "wav2vec2", "hubert", "clip_vision_model",
    "siglip_vision_model",
})  # fmt: skip
HF_ENCODER_DECODERS = frozenset({
    "bart", "mbart", "t5", "mt5", "umt5", "longt5", "pegasus", "marian", "m2m_100",
    "nllb-moe", "whisper", "blenderbot", "prophetnet", "led", "fsmt", "switch_transformers",
})  # fmt: skip
HF_DECODERS = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
    "gemma2", "gemma3", "gemma3_text", "phi", "phi3", "gpt2", "gpt_neox", "gptj", "falcon",
    "opt", "bloom", "mpt", "starcoder2", "olmo", "olmo2", "deepseek_v2", "deepseek_v3",
    "cohere", "granite", "smollm3", "gpt_oss", "stablelm", "llava", "mistral3",
})  # fmt: skip
# GGUF general.architecture values (llama.cpp) of encoders and of recurrent models.
GGUF_ENCODERS = frozenset({
    "bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "t5encoder",
    "modern-bert", "neo-bert", "eurobert", "gemma-embedding", "clip",
})  # fmt: skip
GGUF_ENCODER_DECODERS = frozenset({"t5"})
RECURRENT = frozenset({"mamba", "mamba2", "rwkv6", "rwkv7", "arwkv7", "rwkv6qwen2"})
_DECODER_CLASSES = ("ForCausalLM", "LMHeadModel")
_ENCODER_CLASSES = ("EncoderModel", "ForMaskedLM")
_DISPLAY = {
    "bert": "BERT", "roberta": "RoBERTa", "xlm-roberta": "XLM-RoBERTa", "distilbert":
    "DistilBERT", "deberta": "DeBERTa", "deberta-v2": "DeBERTa-v2", "mpnet": "MPNet",
    "electra": "ELECTRA", "albert": "ALBERT", "nomic-bert": "Nomic BERT", "nomic_bert":
    "Nomic BERT", "jina-bert-v2": "Jina BERT v2", "t5": "T5", "t5encoder": "T5",
    "llama": "Llama", "mistral": "Mistral", "gpt2": "GPT-2", "qwen2": "Qwen2", "qwen3": "Qwen3",
    "gemma": "Gemma", "phi3": "Phi-3", "modernbert": "ModernBERT", "modern-bert": "ModernBERT",
}  # fmt: skip


def describe_architecture(config: ModelConfig | None, gguf: dict[str, Any]) -> dict[str, Any]:
    """Family, kind (encoder, decoder, encoder-decoder, recurrent, unknown), shape, one line."""
    if config is not None and (config.model_type or config.architectures
                               or config.num_hidden_layers):
        facts = _from_config(config)
    elif gguf.get("architecture"):
        facts = _from_gguf(gguf)
    else:
        facts = {"family": None, "kind": "unknown", "source": None,
                 "kind_evidence": "neither config.json nor GGUF metadata names an architecture",
                 "layers": None, "hidden": None, "heads": None, "kv_heads": None,
                 "head_dim": None, "positions": None, "vocab": None}
    family = facts["family"]
    facts["name"] = _DISPLAY.get(family.lower(), family) if family else None
    facts["summary"] = _one_line(facts)
    return facts


def _from_config(config: ModelConfig) -> dict[str, Any]:
    kind, evidence = _config_kind(config)
    return {"family": config.model_type, "kind": kind, "kind_evidence": evidence,
            "source": "config.json", "layers": config.num_hidden_layers,
            "hidden": config.hidden_size, "heads": config.num_attention_heads,
            "kv_heads": config.num_key_value_heads, "head_dim": config.head_dim,
            "positions": config.max_position_embeddings, "vocab": config.vocab_size}


def _config_kind(config: ModelConfig) -> tuple[str, str]:
    if config.is_encoder_decoder:
        return "encoder-decoder", "config.json is_encoder_decoder: true"
    if config.is_decoder:
        return "decoder", "config.json is_decoder: true"
    model_type = (config.model_type or "").lower()
    for name in config.architectures:
        if name.endswith(_DECODER_CLASSES):
            return "decoder", f"config.json architectures: {name}"
        if name.endswith(_ENCODER_CLASSES):
            return "encoder", f"config.json architectures: {name}"
        if name.endswith("ForConditionalGeneration") and model_type not in HF_ENCODER_DECODERS:
            return "decoder", f"config.json architectures: {name} (a generative model)"
    if model_type in HF_DECODERS:
        return "decoder", f"config.json model_type {model_type}"
    if model_type in HF_ENCODERS:
        return "encoder", f"config.json model_type {model_type}: an encoder-only family"
    if model_type in HF_ENCODER_DECODERS:
        return "encoder-decoder", f"config.json model_type {model_type}"
    if model_type in RECURRENT:
        return "recurrent", f"config.json model_type {model_type}"
    if config.is_decoder is False and model_type:
        return "unknown", f"config.json model_type {model_type}, is_decoder: false"
    shown = model_type or "not given"
    return "unknown", f"config.json model_type {shown}: not a family known here"


def _from_gguf(gguf: dict[str, Any]) -> dict[str, Any]:
    arch = gguf["architecture"]
    if arch in GGUF_ENCODERS:
        kind, evidence = "encoder", f"GGUF general.architecture {arch}: an encoder"
    elif arch in GGUF_ENCODER_DECODERS:
        kind, evidence = "encoder-decoder", f"GGUF general.architecture {arch}"
    elif arch in RECURRENT:
        kind, evidence = "recurrent", f"GGUF general.architecture {arch}"
    elif gguf.get("causal") is False:
        kind, evidence = "encoder", f"GGUF {arch}.attention.causal: false"
    else:
        kind, evidence = "decoder", f"GGUF general.architecture {arch}: llama.cpp decoder"
    return {"family": arch, "kind": kind, "kind_evidence": evidence, "source": "GGUF metadata",
            "layers": gguf.get("layers"), "hidden": gguf.get("hidden"),
            "heads": gguf.get("heads"), "kv_heads": gguf.get("kv_heads"),
            "head_dim": gguf.get("head_dim"), "positions": gguf.get("context_length"),
            "vocab": gguf.get("vocab")}


def _one_line(facts: dict[str, Any]) -> str:
    """e.g. "BERT encoder, 6 layers, hidden 384, 12 heads, 512 positions, vocab 30,522"."""
    family = facts["family"]
    if family is None:
        return f"unknown architecture ({facts['kind_evidence']})"
    kind = "" if facts["kind"] == "unknown" else f" {facts['kind']}"
    parts = [f"{facts['name']}{kind}"]
    heads = facts["heads"]
    if heads and facts["kv_heads"] and facts["kv_heads"] != heads:
        heads_text: str | None = f"{heads} heads ({facts['kv_heads']} KV heads)"
    else:
        heads_text = f"{heads} heads" if heads else None
    for text in (_count(facts["layers"], "layers"), _count(facts["hidden"], "hidden", first=True),
                 heads_text, _count(facts["positions"], "positions"),
                 _count(facts["vocab"], "vocab", first=True)):
        if text:
            parts.append(text)
    if facts["kind"] == "unknown":
        parts.append("kind unknown")
    return ", ".join(parts)


def _count(value: int | None, label: str, *, first: bool = False) -> str | None:
    if not value:
        return None
    return f"{label} {value:,}" if first else f"{value:,} {label}"

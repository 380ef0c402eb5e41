"""``SIPConfig``: the T5 shape, the prefix mode and the FST symbol map, in one Hugging Face config."""
from __future__ import annotations

from transformers import PretrainedConfig

from sip_core.fst import vocab
from sip_core.model import tokenizer

PREFIX_MODES = ("fst", "tuned", "soft", "te", "none")

# ByT5-small's shape (REFERENCE §4.1); scratch runs override the sizes from the command line.
BYT5_SMALL_SHAPE = dict(d_model=1472, d_ff=3584, num_layers=12, num_decoder_layers=4, num_heads=6, d_kv=64)


def t5_kwargs(d_model=256, d_ff=1024, num_layers=4, num_decoder_layers=None, num_heads=4, d_kv=64,
              dropout_rate=0.1, **extra) -> dict:
    """T5Config arguments for a ByT5-style model (byte vocab, gated GELU, pad 0 as decoder start)."""
    kw = dict(vocab_size=tokenizer.VOCAB_SIZE, d_model=d_model, d_ff=d_ff, num_layers=num_layers,
              num_decoder_layers=num_layers if num_decoder_layers is None else num_decoder_layers,
              num_heads=num_heads, d_kv=d_kv, dropout_rate=dropout_rate, feed_forward_proj="gated-gelu",
              relative_attention_num_buckets=32, relative_attention_max_distance=128,
              pad_token_id=tokenizer.PAD_ID, eos_token_id=tokenizer.EOS_ID, decoder_start_token_id=0,
              layer_norm_epsilon=1e-6, initializer_factor=1.0)
    kw.update(extra)
    return kw


class SIPConfig(PretrainedConfig):
    """A ByT5-layout T5 with an optional prefix before the input bytes.

    prefix_mode: ``fst`` (one vector per FST transition, pre-training), ``tuned`` (``prefix_length`` free
    vectors, fine-tuning), ``soft`` (``prefix_length`` soft transitions read through the pre-trained FST
    encoder, a fine-tuning lever: docs/EXPERIMENTS.md), ``te`` (a task-embedding table, the TE baseline's
    pre-training), ``none``.
    """

    model_type = "sip"

    def __init__(self, t5: dict | None = None, prefix_mode: str = "none", variant: str = "sip",
                 num_states: int = 16, state_dim: int = 64, symbol_dim: int = 256, final_dim: int = 16,
                 prefix_length: int = 50, te_num_tasks: int = 1, te_dim: int = 180,
                 symbols: list | None = None, symbol_source: str = "table", state_head: bool = False, **kwargs):
        if prefix_mode not in PREFIX_MODES:
            raise ValueError(f"prefix_mode must be one of {PREFIX_MODES}, not {prefix_mode!r}")
        self.t5 = dict(t5) if t5 is not None else t5_kwargs()
        self.prefix_mode = prefix_mode
        self.variant = variant
        self.num_states = num_states
        self.state_dim = state_dim
        self.symbol_dim = symbol_dim
        self.final_dim = final_dim
        self.prefix_length = prefix_length
        self.te_num_tasks = te_num_tasks
        self.te_dim = te_dim
        self.symbol_source = symbol_source  # "table" (the paper's) or "bytes" (tied to byte embeddings)
        self.state_head = bool(state_head)  # linear d_model -> num_states probe for the auxiliary state loss
        # The checkpoint carries its own symbol map so that data and model can be checked to agree.
        self.symbols = list(symbols) if symbols is not None else list(vocab.SYMBOLS)
        kwargs["tie_word_embeddings"] = False  # ByT5 layout: the LM head is its own matrix
        kwargs.setdefault("is_encoder_decoder", True)
        kwargs.setdefault("pad_token_id", tokenizer.PAD_ID)
        kwargs.setdefault("eos_token_id", tokenizer.EOS_ID)
        kwargs.setdefault("decoder_start_token_id", 0)
        super().__init__(**kwargs)

    @property
    def d_model(self) -> int:
        return int(self.t5["d_model"])

    @property
    def n_symbols(self) -> int:
        return len(self.symbols)

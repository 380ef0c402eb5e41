"""``SIPForConditionalGeneration``: a ByT5-layout T5 whose encoder reads [prefix | input bytes].

Prefix and bytes are packed per row ([prefix_i | bytes_i | padding]) rather than padding the prefix to the
batch maximum in the middle of the sequence: with T5's relative position biases, middle padding would
change the distances between transitions and bytes, so an example's output would depend on its batch mates
(REFERENCE §1.7). Packed, padding transitions are masked and positioned after everything real, and the
logits do not depend on the batch (tested).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForSeq2SeqLM, PreTrainedModel, T5Config, T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput

from sip_core.model.codebook import straight_through
from sip_core.model.config import SIPConfig
from sip_core.model.encoder import SoftTransitions, TaskEmbedding, TransitionEncoder
from sip_core.model.fused import fuse_elementwise


class ByT5LayoutT5(T5ForConditionalGeneration):
    """T5 with input embeddings shared by encoder and decoder and an untied LM head (ByT5's layout).

    transformers 5.x ties ``lm_head`` to ``shared`` whatever the config says; dropping it from the tie map
    keeps the head a separate matrix through save and load.
    """

    _tied_weights_keys = {
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
    }


def build_t5(t5_kwargs: dict) -> ByT5LayoutT5:
    # tie_word_embeddings=False here means "do not scale decoder outputs by d_model^-0.5" (T5 v1.1/ByT5).
    config = T5Config(**{**t5_kwargs, "tie_word_embeddings": False})
    model = ByT5LayoutT5(config)
    untie_lm_head(model, scratch=True)
    return fuse_elementwise(model)


def untie_lm_head(t5: T5ForConditionalGeneration, scratch: bool, copy_scale: float | None = None) -> None:
    """Give the LM head its own weights: a fresh N(0, d_model^-1/2) matrix for scratch models (as Mesh TF
    initialises an untied softmax layer), else a copy of the shared embeddings times ``copy_scale``."""
    d_model = t5.config.d_model
    weight = torch.empty_like(t5.shared.weight)
    with torch.no_grad():
        if scratch:
            weight.normal_(0.0, d_model ** -0.5)
        else:
            weight.copy_(t5.shared.weight * (copy_scale if copy_scale is not None else 1.0))
    t5.lm_head = nn.Linear(d_model, t5.config.vocab_size, bias=False)
    t5.lm_head.weight = nn.Parameter(weight)
    t5.config.scale_decoder_outputs = False


def ready_mask(mask: torch.Tensor, implementation: str) -> torch.Tensor:
    """The padding mask of the encoder's inputs as T5's sdpa attention reads it, (B, 1, 1, K) booleans.

    From a (B, K) mask transformers builds this itself, but first checks ``mask.all()`` (to drop a mask with nothing
    padded): a device-to-host wait, once for the encoder's mask and once for the cross-attention's, which stalls
    the training loop's host every step (docs/BENCHMARKS.md, session 25). A 4D mask is used as it is; its
    singleton query axis broadcasts. Other attention implementations (eager: additive masks whose dtype follows
    the hidden states) keep the (B, K) mask and transformers' own path.
    """
    return mask.bool()[:, None, None, :] if implementation == "sdpa" else mask


class SIPForConditionalGeneration(PreTrainedModel):
    config_class = SIPConfig
    base_model_prefix = "sip"
    main_input_name = "input_ids"
    _tied_weights_keys = None
    _no_split_modules = ["T5Block"]
    _supports_sdpa = False

    def __init__(self, config: SIPConfig, t5: T5ForConditionalGeneration | None = None):
        super().__init__(config)
        self.t5 = build_t5(config.t5)
        d_model = self.t5.config.d_model
        self.fst_encoder = None
        self.prefix = None
        self.task_embedding = None
        self.soft_prefix = None
        # Set by fine-tuning (sip_core.model.codebook), never saved: the tuned prefix is then read
        # straight-through as its nearest single-transition encodings.
        self.prefix_codebook = None
        # Set by fine-tuning, never saved (``sip finetune --prefix-dropout/--prefix-noise``): while training, each
        # row drops every tuned prefix slot with this probability and adds Gaussian noise of this std to it.
        self.prefix_dropout = 0.0
        self.prefix_noise = 0.0
        if config.prefix_mode in ("fst", "soft"):
            self.fst_encoder = TransitionEncoder(config.num_states, config.n_symbols, d_model,
                                                 config.state_dim, config.symbol_dim, config.final_dim,
                                                 getattr(config, "symbol_source", "table"), config.symbols)
        if config.prefix_mode == "soft":
            self.soft_prefix = SoftTransitions(config.prefix_length, config.num_states, config.n_symbols)
        elif config.prefix_mode == "tuned":
            self.prefix = nn.Parameter(torch.zeros(config.prefix_length, d_model))
        elif config.prefix_mode == "te":
            self.task_embedding = TaskEmbedding(config.te_num_tasks, config.prefix_length, config.te_dim, d_model)
        self.state_head = nn.Linear(d_model, config.num_states) if getattr(config, "state_head", False) else None
        self.post_init()
        # post_init re-initialises every module by T5's rules, which treat the head as tied (N(0,1));
        # give the untied head its own scale afterwards, and only then swap in a given (pretrained) T5.
        untie_lm_head(self.t5, scratch=True)
        if t5 is not None:
            self.t5 = fuse_elementwise(t5)

    def _init_weights(self, module):
        # Our own modules keep PyTorch's defaults (N(0,1) embeddings, Kaiming Linear) as the original does;
        # everything else is T5's, initialised by T5's own rules.
        if isinstance(module, SoftTransitions):
            return  # uniform logits; fine-tuning initialises them from a sample (init_from_sample)
        if isinstance(module, (TransitionEncoder, TaskEmbedding)) or module is self.state_head:
            for sub in module.modules():
                if isinstance(sub, (nn.Embedding, nn.Linear)):
                    sub.reset_parameters()
        elif module is self:
            if self.prefix is not None:
                with torch.no_grad():
                    self.prefix.normal_()
        elif not any(module is m for m in self._own_modules()):
            self.t5._init_weights(module)

    def _own_modules(self):
        for m in (self.fst_encoder, self.soft_prefix, self.task_embedding, self.state_head):
            if m is not None:
                yield from m.modules()

    def enable_state_head(self) -> None:
        """Add the (PyTorch-default initialised) state head if the model has none."""
        if self.state_head is None:
            self.config.state_head = True
            self.state_head = nn.Linear(self.config.d_model, self.config.num_states).to(self.device)

    def state_logits(self, encoder_hidden: torch.Tensor) -> torch.Tensor:
        """(B, T, num_states) logits of the state after each encoder position (trained on byte positions)."""
        return self.state_head(encoder_hidden)

    @contextmanager
    def reading_fsts(self, encoder: TransitionEncoder):
        """For the ``with`` block, read ``fst`` transitions through ``encoder`` as the prefix, as in pre-training,
        instead of this model's own prefix (``sip finetune --rehearsal``: a tuned-prefix model rehearses
        simulation on pre-training FSTs). The model's mode and modules are restored afterwards."""
        mode, own = self.config.prefix_mode, self.fst_encoder
        self.config.prefix_mode, self.fst_encoder = "fst", encoder
        try:
            yield self
        finally:
            self.config.prefix_mode, self.fst_encoder = mode, own

    # --- encoder input -------------------------------------------------------------------------------
    def prefix_vectors(self, batch_size: int, fst=None, task_ids=None):
        """(vectors (B, T, d), mask (B, T)) of the prefix, or (None, None) without one."""
        mode = self.config.prefix_mode
        if mode == "fst":
            if fst is None:
                raise ValueError("an fst-prefix model needs `fst` (B, T, 5) transitions")
            return self.fst_encoder(fst, self.t5.shared)
        if mode in ("tuned", "soft"):
            prefix = self.prefix if mode == "tuned" else self.fst_encoder.forward_soft(self.soft_prefix, self.t5.shared)
            if mode == "tuned" and self.prefix_codebook is not None:
                prefix = straight_through(prefix, self.prefix_codebook)
            vec = prefix.unsqueeze(0).expand(batch_size, -1, -1)
            return self._regularised(vec)
        if mode == "te":
            if task_ids is None:
                raise ValueError("a task-embedding model needs `task_ids`")
            vec = self.task_embedding(task_ids)
            return vec, torch.ones(vec.shape[:2], dtype=torch.bool, device=vec.device)
        return None, None

    def _regularised(self, vec: torch.Tensor):
        """A tuned prefix as the body reads it: whole, or in training with dropped slots and noise (per row)."""
        keep = torch.ones(vec.shape[:2], dtype=torch.bool, device=vec.device)
        if not self.training:
            return vec, keep
        if self.prefix_noise > 0:
            vec = vec + self.prefix_noise * torch.randn_like(vec)
        if self.prefix_dropout > 0:
            keep = torch.rand(vec.shape[:2], device=vec.device) >= self.prefix_dropout
        return vec, keep

    def encoder_inputs(self, input_ids, attention_mask, fst=None, task_ids=None, encoder_width: int | None = None):
        """inputs_embeds and attention mask of the encoder: [prefix_i | bytes_i | padding] per row.

        ``encoder_width`` (max over rows of prefix + byte length), when the caller knows it from its
        length arrays, saves a device→host synchronisation per step.
        """
        byte_embeds = self.t5.shared(input_ids)
        byte_mask = attention_mask.bool()
        prefix, prefix_mask = self.prefix_vectors(input_ids.shape[0], fst, task_ids)
        if prefix is None:
            return byte_embeds, byte_mask.long()
        prefix = prefix.to(byte_embeds.dtype)
        if self.config.prefix_mode != "fst":  # fixed-length prefix: plain concatenation is already packed
            return torch.cat([prefix, byte_embeds], 1), torch.cat([prefix_mask, byte_mask], 1).long()
        n_prefix = prefix_mask.sum(1, keepdim=True)
        total = n_prefix + byte_mask.sum(1, keepdim=True)
        width = int(total.max()) if encoder_width is None else int(encoder_width)
        t_max = prefix.shape[1]
        pos = torch.arange(width, device=input_ids.device).unsqueeze(0)
        valid = pos < total
        source = torch.where(pos < n_prefix, pos, t_max + pos - n_prefix)
        source = torch.where(valid, source, torch.zeros_like(source))
        both = torch.cat([prefix, byte_embeds], 1)
        packed = torch.gather(both, 1, source.unsqueeze(-1).expand(-1, -1, both.shape[-1]))
        packed = packed * valid.unsqueeze(-1).to(packed.dtype)
        return packed, valid.long()

    # --- forward / encode / generate -----------------------------------------------------------------
    def forward(self, input_ids=None, attention_mask=None, labels=None, fst=None, task_ids=None,
                decoder_input_ids=None, encoder_outputs=None, encoder_width=None, **kwargs):
        if encoder_outputs is None:
            embeds, mask = self.encoder_inputs(input_ids, attention_mask, fst, task_ids, encoder_width)
            mask = ready_mask(mask, self.t5.config._attn_implementation)
            return self.t5(inputs_embeds=embeds, attention_mask=mask, labels=labels,
                           decoder_input_ids=decoder_input_ids, **kwargs)
        return self.t5(encoder_outputs=encoder_outputs, attention_mask=attention_mask, labels=labels,
                       decoder_input_ids=decoder_input_ids, **kwargs)

    def encode(self, input_ids, attention_mask, fst=None, task_ids=None, encoder_width=None):
        """Encoder hidden states and their mask as T5's attention reads it (``ready_mask``), which our greedy decoder
        hands to every step's cross-attention."""
        embeds, mask = self.encoder_inputs(input_ids, attention_mask, fst, task_ids, encoder_width)
        mask = ready_mask(mask, self.t5.config._attn_implementation)
        hidden = self.t5.encoder(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        return BaseModelOutput(last_hidden_state=hidden), mask

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, fst=None, task_ids=None, **kwargs):
        """HF generation over the packed encoder input (greedy by default)."""
        embeds, mask = self.encoder_inputs(input_ids, attention_mask, fst, task_ids)
        kwargs.setdefault("num_beams", 1)
        kwargs.setdefault("do_sample", False)
        return self.t5.generate(inputs_embeds=embeds, attention_mask=mask, **kwargs)


AutoConfig.register("sip", SIPConfig)
AutoModelForSeq2SeqLM.register(SIPConfig, SIPForConditionalGeneration)

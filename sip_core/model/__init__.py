"""SIP model: config, transition encoder, T5 with a prefix, byte tokenizer (registered with Auto* classes)."""
from sip_core.model.config import SIPConfig
from sip_core.model.sip_model import SIPForConditionalGeneration

__all__ = ["SIPConfig", "SIPForConditionalGeneration"]

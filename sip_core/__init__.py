"""SIP: structural inductive bias by simulation (Lindemann, Koller & Titov, ACL 2024), reproduced."""
__version__ = "0.1.0"

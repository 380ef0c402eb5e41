"""Analyses of trained models: the state probe and its transfer (Section 7), tuned-prefix studies (Appendix, Figure 9)."""

#!/usr/bin/env bash
# Fine-tune the from-scratch SIP-d4 and the base model (same shape, random init) on the first TASKS tasks of
# the 4-state iteration and UC settings with the gpu scale's Table 1 commands (see finetune_sweep.sh).
# Usage (GPU host, repo root): TASKS=2 EPOCHS=20 bash experiments/finetune_check.sh
exec bash "$(dirname "$0")/finetune_sweep.sh" "base|" "sip|"

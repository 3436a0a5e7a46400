"""Given responses as training rows: what SFT, DPO and Bradley-Terry reward models share.

- :mod:`.conversation`: a prompt and a given response (text or chat messages, several
  turns) as token ids with a loss mask that is 1 on assistant tokens only, in the
  workers' sequence layout (:func:`tokenize_supervised`, :func:`collate_supervised`).
- :mod:`.preference_pairs`: a prompt with a chosen and a rejected response (TRL's and
  verl's layouts, explicit or implicit prompt) as one interleaved batch
  (:func:`load_preference_pairs`, :func:`collate_preference_pairs`).
- :mod:`.prompt_cuts`: loaded prompt rows given the shorter prompts their rows are trained
  after, re-tokenized and left-padded as the loader does (:func:`reprompt`).
- :mod:`.row_checks`: every loaded row tokenized before a run starts (the preflight checks).
- :mod:`.unread_settings`: the shared RL settings such an algorithm never reads, refused
  (:func:`unread_setting_problems`).
"""

from hfsdk_supervised_data.conversation import (
    SupervisedSequence,
    collate_supervised,
    split_conversation,
    tokenize_supervised,
)
from hfsdk_supervised_data.preference_pairs import (
    PairColumns,
    PreferencePair,
    chosen_rows,
    collate_preference_pairs,
    load_preference_pairs,
    rejected_rows,
    tokenize_preference_pair,
    tokenize_preference_pairs,
)
from hfsdk_supervised_data.prompt_cuts import reprompt
from hfsdk_supervised_data.row_checks import check_preference_rows, prepared_rows
from hfsdk_supervised_data.unread_settings import unread_setting_problems

__all__ = [
    "PairColumns",
    "PreferencePair",
    "SupervisedSequence",
    "check_preference_rows",
    "chosen_rows",
    "collate_preference_pairs",
    "collate_supervised",
    "load_preference_pairs",
    "prepared_rows",
    "rejected_rows",
    "reprompt",
    "split_conversation",
    "tokenize_preference_pair",
    "tokenize_preference_pairs",
    "tokenize_supervised",
    "unread_setting_problems",
]

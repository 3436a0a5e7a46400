"""Run records: what a run keeps of its steps beside its checkpoints, and what reads it back.

``trainer.rollout_dump`` writes each step's samples (``rollouts/step_N.jsonl``, for a
person) and its generations and update batch (``rollouts/step_N.pt``, for a program);
``trainer.mode: train_only`` trains from a previous run's dumped generations;
``hfsdk replay`` re-runs a dumped step's update and compares it with the log;
``hfsdk export`` writes any checkpoint in Hugging Face format. See docs/training.md.

Modules: :mod:`.step_dump`, :mod:`.rollout_dump`, :mod:`.replay`, :mod:`.export`
(loading the plugin imports none of them; its hooks do, when they run).
"""

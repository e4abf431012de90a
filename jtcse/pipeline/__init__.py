"""The whole JTCSE recipe, resumable: warm up two towers → train the twin → (ensemble it with other models) →
distil into the model you started from → evaluate every model against that starting model.

One run is one :class:`~jtcse.pipeline.settings.PipelineConfig` (every setting, declared once: ``settings``),
whose decisions :func:`~jtcse.pipeline.plan.make_plan` makes before anything is written (``plan``), carried out
by :func:`~jtcse.pipeline.run.run_pipeline` (``run``) over the stages of :data:`~jtcse.pipeline.stages.STAGES`
(``stages``: the one list of them, each stage's behaviour with it), reported by ``report``; recipe files read and
written by ``recipe``.

The CPU defaults (``evaluation/DEFAULTS.md``) keep each stage's last step and only report the dev file; the
paper's recipes (``models/``) keep the best checkpoint by dev (``checkpoint = "best-dev"``). What is chosen (the
probe's twin learning rate, the ensemble's weights) is chosen on the selection file
(:mod:`jtcse.training.selection`).
"""

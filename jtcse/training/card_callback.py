"""The model-card callback of jtcse's trainer: :class:`CardCallbackWithoutWidget`."""

from __future__ import annotations

from sentence_transformers.sentence_transformer.model_card import SentenceTransformerModelCardCallback


class CardCallbackWithoutWidget(SentenceTransformerModelCardCallback):
    """sentence-transformers' model-card callback without the widget examples it samples from the training data as
    the trainer starts (a bar, "Computing widget examples"). A jtcse run writes its own card when it ends
    (:func:`jtcse.model_card.write_model_card`, from a fresh ``JTCSEModelCardData``), so they would be thrown away; the public
    switch, ``generate_widget_examples=False``, is set on the model's card data, and since sentence-transformers 6.2
    samples the examples whatever that switch says, the sampling is skipped here while the callback starts."""

    def on_init_end(self, args, state, control, model, trainer, **kwargs):
        data = model.model_card_data
        data.generate_widget_examples = False
        data.set_widget_examples = _no_widget_examples  # this instance only, while the callback starts
        try:
            super().on_init_end(args, state, control, model=model, trainer=trainer, **kwargs)
        finally:
            del data.set_widget_examples


def _no_widget_examples(dataset) -> None:
    """Sample no widget examples (:class:`CardCallbackWithoutWidget`)."""

"""Training stages: tower warm-up (SimCSE), twin training, distillation, and the glue they share."""

"""The defaults driver's training stages up to the twins: baselines, the SimCSE controls (= warm-up towers), the
corpus size, the twin loss ablation, learning-rate probe and length, pooling, and the loss terms before training."""

from __future__ import annotations

import statistics
from pathlib import Path

from evaluation.drivers.grid import load_shipped, load_shipped_cls
from evaluation.drivers.repro_default_scores import ScoredGrid
from evaluation.drivers.repro_default_settings import ABLATIONS, SHIPPED


class TwinStages(ScoredGrid):
    """The stages ``baselines`` … ``twins``, ``cls`` and ``cls_recipe`` on :class:`ScoredGrid`."""

    def baselines(self) -> None:
        self.score(SHIPPED, load_shipped, group="baseline", pooling="mean (as shipped)")
        self.score("shipped_cls", load_shipped_cls, group="baseline", pooling="cls")

    def warmup(self, seed: int, pooling: str | None) -> str:
        """SimCSE of the shipped MiniLM (``pooling`` None: its own modules = the control row); the row name."""
        from sentence_transformers import SentenceTransformer

        from jtcse.training.simcse import train_simcse

        name = f"control_s{seed}" if pooling is None else f"warmup_{pooling}_s{seed}"
        out = self.work / name
        self.trained(
            name,
            lambda: train_simcse(
                None, self.corpus, out, pooling=pooling, seed=seed, logging_steps=20, **self.cfg["simcse"]
            ),
            lambda: SentenceTransformer(str(out), device="cpu"),
            group="control" if pooling is None else "warmup",
            seed=seed,
            pooling=pooling or "own (mean + Normalize)",
        )
        return name

    def controls(self) -> None:
        for seed in self.cfg["seeds"]:
            self.warmup(seed, None)

    def corpus_size(self) -> None:
        """The control on the first 3,000 lines only (the issue's 87.13, the budget of evaluation/UCD.md)."""
        from sentence_transformers import SentenceTransformer

        from jtcse.training.simcse import train_simcse

        small = self.work / "corpus_small.txt"
        if not small.exists():
            lines = self.corpus.read_text(encoding="utf-8").splitlines()[: self.cfg["small_corpus_lines"]]
            small.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for seed in self.cfg["seeds"]:
            name = f"control_small_s{seed}"
            out = self.work / name
            self.trained(
                name,
                lambda: train_simcse(None, small, out, seed=seed, logging_steps=20, **self.cfg["simcse"]),
                lambda: SentenceTransformer(str(out), device="cpu"),
                group="control_small",
                seed=seed,
                lines=self.cfg["small_corpus_lines"],
                pooling="own (mean + Normalize)",
            )

    # -- twins -------------------------------------------------------------------------------------
    def twin_name(self, pooling: str, lr: float, steps: int, seed: int, variant: str = "") -> str:
        return f"twin_{pooling}_lr{lr:g}_n{steps}{variant}_s{seed}"

    def tower(self, seed: int, pooling: str) -> Path:
        """Warm-up tower W_seed: the control of that seed (mean pooling), or a CLS warm-up."""
        return self.work / (self.warmup(seed, None) if pooling == "mean" else self.warmup(seed, pooling))

    def twin(self, pooling: str, lr: float, steps: int, seed: int, variant: str = "", **loss) -> str:
        """Twin of (W_s, W_s+1) (``variant`` "_direct": of two copies of the shipped MiniLM); the row name."""
        from jtcse.modeling.loading import load_model
        from jtcse.training.twin import train_twin

        seeds = self.cfg["seeds"]
        a, b = seed, seeds[(seeds.index(seed) + 1) % len(seeds)]
        towers = (None, None) if variant == "_direct" else (str(self.tower(a, pooling)), str(self.tower(b, pooling)))
        name = self.twin_name(pooling, lr, steps, seed, variant)
        out = self.work / name
        settings = {**self.cfg["twin"], **loss}
        self.trained(
            name,
            lambda: train_twin(
                *towers,
                self.corpus,
                out,
                pooling=pooling,
                seed=seed,
                learning_rate=lr,
                max_steps=steps,
                logging_steps=10,
                show_progress=False,
                device="cpu",
                **settings,
            ),
            lambda: load_model(out, device="cpu"),
            group="twin",
            seed=seed,
            pooling=pooling,
            learning_rate=lr,
            max_steps=steps,
            variant=variant or "recipe",
            towers=["shipped", "shipped"] if variant == "_direct" else [f"W{a}", f"W{b}"],
            settings=settings,
        )
        return name

    def best_variant(self) -> str:
        """The loss variant ("" = the full JTCSE loss, or an :data:`ABLATIONS` key) best on seed 1's selection
        split at ``variant_lr`` and the probe length."""
        lr, steps, seed = self.cfg["variant_lr"], self.cfg["probe_steps"], self.cfg["seeds"][0]
        return self.chosen({v: self.twin_name("mean", lr, steps, seed, v) for v in ("", *ABLATIONS)}, "ablation")

    def ablation(self) -> None:
        """The twin's loss on a pre-trained encoder (seed 1, ``variant_lr``, probe length): which terms pay?"""
        lr, steps, seed = self.cfg["variant_lr"], self.cfg["probe_steps"], self.cfg["seeds"][0]
        for variant in (*ABLATIONS, ""):
            self.twin("mean", lr, steps, seed, variant, **ABLATIONS.get(variant, {}))

    def probed(self) -> dict:
        """``{(variant, lr): row name}`` of the probe: the full loss and the best variant at each probe lr."""
        seed, steps = self.cfg["seeds"][0], self.cfg["probe_steps"]
        return {
            (v, lr): self.twin_name("mean", lr, steps, seed, v)
            for v in dict.fromkeys(["", self.best_variant()])
            for lr in self.cfg["twin_lrs"]
        }

    def probe(self) -> None:
        """The full loss and the best variant at each probe lr (seed 1, probe length)."""
        for variant, lr in self.probed():
            self.twin("mean", lr, self.cfg["probe_steps"], self.cfg["seeds"][0], variant, **ABLATIONS.get(variant, {}))

    def tuned(self) -> tuple[str, float]:
        """``(loss variant, lr)`` of the probe's best twin on the selection split."""
        return self.chosen(self.probed(), "probe")

    def twin_loss(self) -> str:
        return self.tuned()[0]

    def full_loss_twin(self) -> str:
        """Seed 1's twin with the full JTCSE loss at its best probe lr (the JTCSE twin proper, whatever loss won)."""
        seed, steps = self.cfg["seeds"][0], self.cfg["probe_steps"]
        lr = self.chosen({lr: self.twin_name("mean", lr, steps, seed) for lr in self.cfg["twin_lrs"]}, "probe")
        return self.twin_name("mean", lr, steps, seed)

    def tuned_lr(self) -> float:
        return self.tuned()[1]

    def twin_steps(self) -> int:
        """The twin length: probe length or ``twin_steps``, whichever scores better on seed 1's selection split."""
        lr, seed, variant = self.tuned_lr(), self.cfg["seeds"][0], self.twin_loss()
        return self.chosen(
            {
                n: self.twin_name("mean", lr, n, seed, variant)
                for n in (self.cfg["probe_steps"], self.cfg["twin_steps"])
            },
            "twins",
        )

    def cls(self) -> None:
        """Pooling side by side at the tuned lr and probe length: twins of two copies of the shipped MiniLM
        (no warm-up), CLS and mean."""
        lr, steps, seed = self.tuned_lr(), self.cfg["probe_steps"], self.cfg["seeds"][0]
        for pooling in ("mean", "cls"):
            self.twin(pooling, lr, steps, seed, "_direct")

    def cls_recipe(self) -> None:
        """The CLS recipe at the same settings: CLS warm-ups W1, W2 and their CLS twin."""
        self.twin("cls", self.tuned_lr(), self.cfg["probe_steps"], self.cfg["seeds"][0])

    def twins(self) -> None:
        """The chosen loss on seed 1 at ``twin_steps`` too (longer twin?), then every seed at the chosen length."""
        lr, seeds, variant = self.tuned_lr(), self.cfg["seeds"], self.twin_loss()
        self.twin("mean", lr, self.cfg["twin_steps"], seeds[0], variant, **ABLATIONS.get(variant, {}))
        steps = self.twin_steps()
        for seed in seeds:
            self.twin("mean", lr, steps, seed, variant, **ABLATIONS.get(variant, {}))

    def untrained_twin(self, seed: int):
        """The mean-pooled twin of (W_s, W_s+1) before any twin training."""
        from jtcse.modeling.build import build_twin

        seeds = self.cfg["seeds"]
        a, b = seed, seeds[(seeds.index(seed) + 1) % len(seeds)]
        return build_twin(str(self.tower(a, "mean")), str(self.tower(b, "mean")), pooling="mean", device="cpu")

    def untrained(self) -> None:
        """The untrained twin of every seed: what the summed warm-ups give alone."""
        seeds = self.cfg["seeds"]
        for seed in seeds:
            b = seeds[(seeds.index(seed) + 1) % len(seeds)]
            self.score(
                f"twin_untrained_s{seed}",
                lambda: self.untrained_twin(seed),
                group="twin_untrained",
                seed=seed,
                towers=[f"W{seed}", f"W{b}"],
                pooling="mean",
            )

    def terms(self) -> None:
        """What drives a twin's update: each JTCSE term's value and the norm of its gradient over the towers'
        parameters, before training, on the same 4 batches of 16 corpus sentences (dropout views, seeded)."""
        import torch

        from jtcse.losses import JTCSELoss
        from jtcse.losses.jtcse_loss import stack_views
        from jtcse.modeling.build import build_twin

        if self.done("terms"):
            return
        lines = self.corpus.read_text(encoding="utf-8").splitlines()
        batches = [lines[i * 16 : (i + 1) * 16] for i in range(4)]
        w1, w2 = (str(self.tower(s, "mean")) for s in self.cfg["seeds"][:2])
        setups = {
            "mean twin of W1, W2 (the recipe)": (w1, w2, "mean"),
            "mean twin of 2 × shipped": (None, None, "mean"),
            "CLS twin of 2 × shipped": (None, None, "cls"),
        }
        out = {}
        for label, (a, b, pooling) in setups.items():
            model = build_twin(
                a, b, cael_every=2, max_seq_length=self.cfg["twin"]["max_seq_length"], pooling=pooling, device="cpu"
            ).train()
            loss = JTCSELoss(model, seed=0)
            params = [p for p in model.parameters() if p.requires_grad]
            sums: dict[str, list[float]] = {}
            for k, batch in enumerate(batches):
                torch.manual_seed(k)
                features = stack_views([model.preprocess(batch)], pad_token_id=model.tokenizer.pad_token_id)
                terms = loss.compute_loss_from_outputs(model(features))
                for name, term in terms.items():
                    grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
                    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None)).item()
                    sums.setdefault(name, []).append(term.item())
                    sums.setdefault(f"{name}_grad_norm", []).append(norm)
            out[label] = {k: statistics.fmean(v) for k, v in sums.items()}
        self.save(
            "terms",
            {
                "group": "terms",
                "batches": len(batches),
                "batch_size": 16,
                "setups": out,
                "note": "weighted terms (ICTM x 0.5) as JTCSELoss returns them; gradient norms over all parameters",
            },
        )

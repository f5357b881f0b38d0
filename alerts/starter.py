"""The governed rule pack every new project starts with, and the runbooks its rules link to.

Tuned on the tune half of benchmarks/faults (generated CPU runs and real public
runs); the figures on the held-out half are in docs/fault-corpus.md. The owner is the
project's on-call owner (`issue_token --owner`); each rule's diagnostic link is
its runbook page on this console (`/runbooks/<rule name>/`).
"""
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from alerts.models import Rule
from alerts.rules import save_rule
from ingest.models import Condition, Project

PER_COMPONENT_HEALTH = ["grad_norm", "weight_norm", "update_ratio", "act_norm", "dead_fraction"]
# Every phase kind but warmup (ingest.contract's vocabulary; free-text phases are steady, an announced change of
# config is `reconfigured`).
NOT_WARMUP = ["steady", "lr_decay", "cooldown", "eval", "checkpoint", "data_refresh", "restart", "reconfigured"]

STARTER_RULES = [
    {
        "name": "nonfinite-loss",
        "kind": "nonfinite",
        "description": "A loss or validation loss that is NaN or infinite.",
        "scope": {"metrics": ["loss", "val_loss", "eval/*", "val/*"]},
        "persistence": {"points": 1, "resolve_points": 10},
        "permitted_response": "notify",
        "runbook": {
            "title": "Non-finite loss",
            "meaning": "The loss was NaN or ±Infinity. Every step from here on is wasted compute; a run rarely recovers on its own.",
            "checks": [
                "Open the run page: which component's gradients went non-finite first (the nonfinite-gradients alert names it)?",
                "Was the step right after a learning-rate change, a data refresh or a restart?",
                "Check the loss scale (mixed precision) and the last data batch for corrupt records.",
            ],
            "response": "Notify the owner. Stopping is allowed only if the project has opted in to automatic stops for hard invariants.",
        },
    },
    {
        "name": "nonfinite-weights",
        "kind": "nonfinite",
        "description": "Non-finite weights or activations in a component (never skipped by a loss scaler: the model itself is damaged).",
        "scope": {"metrics": ["weight_norm", "act_norm", "act_max", "dead_fraction"], "component": "*"},
        "persistence": {"points": 1, "resolve_points": 10},
        "permitted_response": "notify",
        "runbook": {
            "title": "Non-finite weights or activations in a component",
            "meaning": "A component's weight or activation norm was NaN or ±Infinity. Unlike a gradient overflow, which a loss scaler skips, non-finite weights do not heal: every later step computes with them. The alert names the component; the first one to go is usually the cause.",
            "checks": [
                "On the run page the components are ordered by when they first left their band: start at the top.",
                "Look for an exploding grad_norm or update_ratio in that component in the steps before.",
                "What wrote the weights at that step: a checkpoint load, a custom hook, a distributed sync?",
            ],
            "response": "Notify the owner; roll back to the last good checkpoint.",
        },
    },
    {
        "name": "nonfinite-gradients",
        "kind": "nonfinite",
        "description": "Non-finite gradients or updates at a rate, not per occurrence: 3 of a series' last 20 points, outside warmup (a loss scaler skips isolated overflows by design).",
        "scope": {"metrics": ["grad_norm", "update_ratio"], "component": "*", "phases": NOT_WARMUP},
        "persistence": {"points": 1, "resolve_points": 10},
        "params": {"count": 3, "within": 20},
        "permitted_response": "notify",
        "runbook": {
            "title": "Non-finite gradients, again and again",
            "meaning": "Gradients or updates were NaN or ±Infinity at 3 of the last 20 points. Mixed precision's loss scaler skips a step whose gradients overflow and lowers its scale, so an overflow now and then (and a few at the start) is normal; this rate is not: steps are being skipped persistently and the run is not training. When every component goes at once the origin is the run, not a component.",
            "checks": [
                "Is the loss scale collapsing (the job's loss_scale metric, if it sends one)? Then it is numerics: a too-high learning rate, an fp16 range problem, a bad batch repeated.",
                "Is it one component only? Look at its grad_norm and weights in the steps before.",
                "Check for a learning-rate spike or a data refresh at that step.",
            ],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "loss-spike",
        "kind": "band",
        "description": "Training loss above its phase-aware band (a ratio to its level), or its level (the median of 20 points) lastingly 5% above the 20 before, for 3 points in a row (quiet in warmup, eval, checkpoints, data refreshes; after a restart the loss must continue from where the checkpoint left it). It ends when the level is back where it was.",
        "scope": {"metrics": ["loss"], "component": ""},
        "persistence": {"points": 3, "resolve_points": 10},
        "params": {"direction": "above", "width": 6.0, "scale": "ratio", "level_points": 20, "level_min": 0.05},
        "permitted_response": "notify",
        "runbook": {
            "title": "Loss spike or failed restore",
            "meaning": "The training loss left the band of its own recent history (same phase) for several points in a row. Right after a restart it means the run did not continue from its checkpoint.",
            "checks": [
                "Did it start right after a restart? Compare with the previous attempt at the same steps (run page, restart shown as its own attempt): a jump means the restore failed (wrong checkpoint, optimizer state, data position, host).",
                "Otherwise: the learning rate at that step, the gradient norms of each component, the data batch.",
                "A spike that recovers within a few points is normal; a sustained one is not.",
            ],
            "response": "Notify the owner, who decides whether to rewind to the last good checkpoint.",
        },
    },
    {
        "name": "gradient-explosion",
        "kind": "band",
        "description": "One component's gradient norm far above its own band (at least ~2× its level, at most 10×), or ramped to 4× where it stood a window earlier, for 3 points.",
        "scope": {"metrics": ["grad_norm"], "component": "*"},
        "persistence": {"points": 3, "resolve_points": 10},
        "params": {"direction": "above", "width": 6.0, "rel_floor": 0.12, "scale": "ratio", "max_ratio": 10.0,
                   "drift_ratio": 4.0},
        "permitted_response": "notify",
        "runbook": {
            "title": "A component's gradients are exploding",
            "meaning": "The gradient norm of the named component (or the whole model) stayed far above its recent band.",
            "checks": [
                "Is it one component or all of them? One: look at that layer's weights and activations. All: learning rate or data.",
                "Check gradient clipping and the loss scale.",
            ],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "dead-component",
        "kind": "threshold",
        "description": "A component whose units are all dead (dead_fraction above 0.99) for 3 points.",
        "scope": {"metrics": ["dead_fraction"], "component": "*"},
        "persistence": {"points": 3, "resolve_points": 5},
        "params": {"above": 0.99},
        "permitted_response": "notify",
        "runbook": {
            "title": "Dead component",
            "meaning": "Nearly every unit of the named component outputs zero for whole batches: it no longer learns or passes signal.",
            "checks": [
                "Look at the component's weight norm and its inputs' activations just before.",
                "A large update (learning-rate spike) often kills ReLU units.",
            ],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "lost-gradient",
        "kind": "threshold",
        "description": "A component whose gradient norm is ~0 for 5 points.",
        "scope": {"metrics": ["grad_norm"], "component": "*"},
        "persistence": {"points": 5, "resolve_points": 5},
        "params": {"below": 1e-8},
        "permitted_response": "notify",
        "runbook": {
            "title": "A component lost its gradient",
            "meaning": "The named component receives no gradient: it is dead, detached from the graph, or masked.",
            "checks": ["Check dead_fraction of the component and of the one feeding it.", "Check recent code changes (detach, no_grad, frozen parameters)."],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "frozen-component",
        "kind": "threshold",
        "description": "A component whose weights stopped changing (update_ratio below 1e-7) for 5 points.",
        "scope": {"metrics": ["update_ratio"], "component": "*"},
        "persistence": {"points": 5, "resolve_points": 5},
        "params": {"below": 1e-7},
        "permitted_response": "notify",
        "runbook": {
            "title": "Frozen component",
            "meaning": "The named component's weights stopped changing while training goes on.",
            "checks": ["Was it frozen on purpose (fine-tuning)? Then scope the rule away from it.", "Check the optimizer's parameter groups and their learning rates."],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "throughput-drop",
        "kind": "band",
        "description": "Throughput below its band (at least ~1/3 under its level, at most half of it), or drifted to 2/3 of where it stood a window earlier, for 10 steps and 1.5 s of the job's own time, outside checkpoints and evaluations.",
        "scope": {"metrics": ["throughput", "tokens_per_s", "samples_per_s"], "component": "*"},
        "persistence": {"points": 10, "resolve_points": 10},
        "params": {"direction": "below", "width": 6.0, "rel_floor": 0.07, "scale": "ratio", "max_ratio": 2.0,
                   "drift_ratio": 1.5, "persistence_seconds": 1.5},
        "permitted_response": "notify",
        "runbook": {
            "title": "Throughput drop",
            "meaning": "Training slowed down outside checkpoint and evaluation phases: a data loader stall, a slow node, network or storage trouble.",
            "checks": ["Check data_wait / io_time if the job sends them.", "Check the nodes' system alerts (Alertmanager events on the run page)."],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "slow-steps",
        "kind": "band",
        "description": "Step time above its band (at least ~1/2 over its level, at most twice it), or drifted to 1.5× where it stood a window earlier, for 10 steps and 1.5 s of the job's own time, outside checkpoints and evaluations.",
        "scope": {"metrics": ["step_time"], "component": "*"},
        "persistence": {"points": 10, "resolve_points": 10},
        "params": {"direction": "above", "width": 6.0, "rel_floor": 0.07, "scale": "ratio", "max_ratio": 2.0,
                   "drift_ratio": 1.5, "persistence_seconds": 1.5},
        "permitted_response": "notify",
        "runbook": {
            "title": "Slow steps",
            "meaning": "Training steps take longer than usual outside checkpoint and evaluation phases, for long enough to matter: a data loader stall, a slow node, network or storage trouble.",
            "checks": ["Check data_wait / io_time if the job sends them.", "Check the nodes' system alerts (Alertmanager events on the run page)."],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "weight-jump",
        "kind": "weight_jump",
        "description": "A component's weight norm changed between two samples by more than its optimizer could have moved it (update_ratio, else its own history), by at least ×1.25.",
        "scope": {"metrics": ["weight_norm"], "component": "*"},
        "persistence": {"points": 1, "resolve_points": 10},
        "params": {"allowance": 3.0, "min_ratio": 1.25},
        "permitted_response": "notify",
        "runbook": {
            "title": "A component's weights jumped",
            "meaning": "The named component's weights changed by more than any optimizer step could have changed them: something outside the optimizer wrote them (a bad checkpoint load, a buggy hook, a corrupted all-reduce, memory corruption). What happens next in the other components (exploding gradients, activations, loss) follows from it.",
            "checks": [
                "Start at this component: the alerts of the other components at the same or later steps are usually its consequences.",
                "What wrote the weights at that step: a checkpoint load, weight surgery, a custom hook, an EMA or averaging step, a distributed sync?",
                "Compare the component's weight_norm before and after the step on the run page.",
            ],
            "response": "Notify the owner; roll back to the last checkpoint before the jump if the weights are not meant to change that way.",
        },
    },
    {
        "name": "update-surge",
        "kind": "band",
        "description": "A component's update per unit of learning rate (update_ratio ÷ lr) 10× above its own band: the optimizer itself made an abnormal update (its state corrupted or reset), whatever the gradient did. The weights it moved stay moved: it waits for a person after the updates are normal again.",
        "scope": {"metrics": ["update_ratio"], "component": "*"},
        "persistence": {"points": 1, "resolve_points": 10, "until_reviewed": True},
        "params": {"direction": "above", "width": 6.0, "rel_floor": 0.4, "scale": "ratio", "max_ratio": 10.0, "per": "lr"},
        "permitted_response": "notify",
        "runbook": {
            "title": "The optimizer made an abnormal update",
            "meaning": "The named component's weights moved 10× more per unit of learning rate than they had been moving. The learning rate does not explain it (it is divided out), and a gradient spike would show in grad_norm first: the optimizer's own state is the usual cause (Adam's second moment zeroed, reset or corrupted by a bad checkpoint load, a resumed run without its optimizer state).",
            "checks": [
                "Was there a restart or a checkpoint load just before? Check that the optimizer state was restored with the model.",
                "Is the component's grad_norm normal at that step? Then the optimizer, not the data, made the update.",
                "How far did the update move the component's weight_norm?",
            ],
            "response": "Notify the owner; roll back to the last checkpoint before the surge if the weights moved far.",
        },
    },
    {
        "name": "vanishing-gradient",
        "kind": "band",
        "description": "A component's gradient norm 30× below its own band for 5 points (a collapse by orders of magnitude, above the absolute floor of lost-gradient).",
        "scope": {"metrics": ["grad_norm"], "component": "*"},
        "persistence": {"points": 5, "resolve_points": 10},
        "params": {"direction": "below", "width": 6.0, "rel_floor": 0.6, "scale": "ratio", "max_ratio": 30.0},
        "permitted_response": "notify",
        "runbook": {
            "title": "A component's gradients collapsed",
            "meaning": "The named component's gradient norm fell far below its own recent level and stayed there: it has all but stopped learning, although its gradient is not exactly zero.",
            "checks": [
                "A gradient scaling or clipping hook on that component? A detach or a mask that cuts most of its graph?",
                "Are its units dying? Look at its dead_fraction and act_norm.",
                "Is it every component? Then look at the learning rate and the loss scale.",
            ],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "lr-collapse",
        "kind": "band",
        "description": "The learning rate 100× below its band, from a level still at least 1% of its peak (a schedule that fell to zero or near it outside warmup), for 5 points. A step decay, or a schedule reaching zero at its end, is not one.",
        "scope": {"metrics": ["lr", "learning_rate"], "component": ""},
        "persistence": {"points": 5, "resolve_points": 5},
        "params": {"direction": "below", "width": 6.0, "rel_floor": 0.77, "scale": "ratio", "max_ratio": 100.0,
                   "floor_share": 0.01},
        "permitted_response": "notify",
        "runbook": {
            "title": "The learning rate collapsed",
            "meaning": "The learning rate fell by two orders of magnitude or more outside warmup. Every component stops moving at once (frozen-component fires everywhere): the schedule is the cause, and the incident names it as the origin.",
            "checks": [
                "The scheduler's configuration and state after the last restart (a resumed scheduler at the wrong step, a zero LR group).",
                "Was it planned (the end of the schedule)? Then this run's budget is spent.",
            ],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "loss-under-trend",
        "kind": "band",
        "description": "Training loss below its phase-aware band (under ~0.4× its expected level) for 10 points: an abrupt fall below its own trend, typically data repeating (the model memorises).",
        "scope": {"metrics": ["loss"], "component": ""},
        "persistence": {"points": 10, "resolve_points": 10},
        "params": {"direction": "below", "width": 6.0, "rel_floor": 0.15, "scale": "ratio"},
        "permitted_response": "notify",
        "runbook": {
            "title": "Training loss fell abruptly below its trend",
            "meaning": "The training loss dropped far below where its own trend was heading. Training does not get easier that fast on fresh data: the data loader is most likely repeating a few batches (a broken sampler, an exhausted shard looping), and the validation loss will rise next.",
            "checks": [
                "The data loader's position and shard after the last restart or refresh; the sampler's seed per epoch.",
                "Compare the validation loss at the next evaluation.",
            ],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "component-silent",
        "kind": "absence",
        "description": "A component whose health telemetry stopped while the run goes on (50 steps and 5 of its own intervals past its last point): with ranks or nodes as components, a dead worker.",
        "scope": {"metrics": PER_COMPONENT_HEALTH, "component": "*"},
        "persistence": {"points": 1, "resolve_points": 1},
        "params": {"behind_steps": 50},
        "permitted_response": "notify",
        "runbook": {
            "title": "A component stopped reporting",
            "meaning": "The named component sends nothing while the rest of the run moves on. Its hooks were removed, its process died (a rank or a node), or the job stopped computing it.",
            "checks": [
                "With ranks or nodes as components: is that process alive (scheduler, Alertmanager events on the run page)?",
                "Was the component removed or renamed on purpose (a config change)?",
            ],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "reference-gap",
        "kind": "reference",
        "description": "Training loss more than 10% above every reference run of the project at the same step, for 20 points (quiet while the project has no reference run).",
        "scope": {"metrics": ["loss"], "component": ""},
        "persistence": {"points": 20, "resolve_points": 20},
        "params": {"direction": "above", "ratio": 1.1},
        "permitted_response": "review",
        "runbook": {
            "title": "The run is worse than its reference runs",
            "meaning": "At the same step the run's loss is more than 10% above the worst of the project's reference runs. A fault that lasted (a failed restore that never recovered, data that changed) looks normal to a band learnt from the run itself, but not beside runs that did not have it.",
            "checks": [
                "Open the run review: step 3 compares the run with its references at the same steps.",
                "When did the gap open? A restart, a data refresh or a config change there is the first suspect.",
                "Are the references comparable (same data, model size and schedule)?",
            ],
            "response": "Open a run review: continue, intervene or stop is a human decision, recorded in the run's decision log.",
        },
    },
    {
        "name": "missing-data",
        "kind": "absence",
        "description": "Gaps of more than 5 steps in the loss, or more than 15 minutes between points.",
        "scope": {"metrics": ["loss"], "component": ""},
        "persistence": {"points": 1, "resolve_points": 1},
        "params": {"missing_steps": 5, "seconds": 900},
        "permitted_response": "notify",
        "runbook": {
            "title": "Missing data",
            "meaning": "Steps are missing (lost batches), or the run sent nothing for too long: it may have hung or died.",
            "checks": ["Is the job still running? Check the scheduler.", "Look for a spooled file of the client (warninglight) to import later."],
            "response": "Notify the owner.",
        },
    },
    {
        "name": "validation-divergence",
        "kind": "divergence",
        "description": "Validation loss rising over 3 evaluations in a row while the training loss keeps falling, or sooner: rising and 3% above its lowest evaluation while the training loss is below where it was then.",
        "scope": {"metrics": ["val_loss"], "component": ""},
        "persistence": {"points": 1, "resolve_points": 1},
        "params": {"training": "loss", "evaluations": 3, "min_rise": 0.01, "fast_rise": 0.03},
        "permitted_response": "review",
        "runbook": {
            "title": "Validation loss rising while training loss falls",
            "meaning": "The model is overfitting or the training data drifted away from the validation data.",
            "checks": ["Check recent data refreshes and the data snapshot.", "Compare with reference runs at the same step."],
            "response": "Open a run review: stop or continue is a human decision, recorded in the run's decision log.",
        },
    },
    {
        "name": "job-health-events",
        "kind": "event",
        "description": "Every health event the job reports about a component.",
        "scope": {"conditions": list(Condition.values), "component": "*"},
        "persistence": {"points": 1},
        "permitted_response": "notify",
        "runbook": {
            "title": "Health event from the job",
            "meaning": "The training job's own health hooks (warninglight client or Alertmanager) reported a named condition on a component.",
            "checks": ["The condition and magnitude are on the alert; the client's README documents each condition's trigger."],
            "response": "Notify the owner.",
        },
    },
]

RUNBOOKS = {rule["name"]: rule["runbook"] | {"rule": rule} for rule in STARTER_RULES}


def runbook_url(name: str) -> str:
    return f"{settings.CONSOLE_URL}/runbooks/{name}/"


LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


def console_link(url: str) -> str:
    """A diagnostic link as the console's pages open it: a link to one of its own runbook pages becomes a path here.

    Starter rules store an absolute link (governance wants an http(s) URL) made
    from CONSOLE_URL when the project was created. When the console has moved
    since (another port: `WL_PORT=8811 bin/run` after a first start on 8000),
    that origin is stale but the page is still served here. A loopback origin
    can only ever have meant this machine's console; other links stay as stored.
    """
    parts = urlsplit(url)
    name = parts.path.removeprefix("/runbooks/").removesuffix("/")
    if parts.path != f"/runbooks/{name}/" or name not in RUNBOOKS or parts.query or parts.fragment:
        return url
    if f"{parts.scheme}://{parts.netloc}" == settings.CONSOLE_URL or parts.hostname in LOOPBACK_HOSTS:
        return reverse("console:runbook", args=[name])
    return url


def install_starter_pack(project: Project, *, user=None) -> list[Rule]:
    """Create the pack once per project (claimed with a conditional update); rules that exist by name are kept."""
    if not project.owner_name:
        return []
    with transaction.atomic():
        claimed = Project.objects.filter(pk=project.pk, starter_pack_at__isnull=True).update(starter_pack_at=timezone.now())
        if not claimed:
            return []
        existing = set(Rule.objects.filter(project=project).values_list("name", flat=True))
        owner = f"{project.owner_name} <{project.owner_contact}>"
        created = []
        for spec in STARTER_RULES:
            if spec["name"] in existing:
                continue
            fields = {k: v for k, v in spec.items() if k != "runbook"}
            rule = Rule(project=project, owner=owner, diagnostic_url=runbook_url(spec["name"]), **fields)
            created.append(save_rule(rule, user=user, source="starter"))
    return created


def starter_pack_for_new_project(sender, project, **kwargs) -> list[Rule]:
    """ingest.signals.project_set_up: the pack, once, for a project with an owner."""
    return install_starter_pack(project)

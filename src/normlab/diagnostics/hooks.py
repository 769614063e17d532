"""The one capture path: forward hooks on a subject's blocks and norms, for every tool.

    with recording(subject, norms=True) as rec:
        logits = subject.forward(ids)
    rec.stream          # x_0 .. x_L: the main stream entering block 1, then leaving each block
    rec.aux_stream()    # the second stream beside it (ResiDual's d), or None
    rec.norm_in["blocks.3.attn.norm"]   # what that norm received; "norm_f": the final norm
    rec.inputs["blocks.3.ffn"]          # what block 3's sub-module ffn received (inputs=True)
    rec.sites           # ("embed", x_0), then (name, output) of each block's sub-modules and
                        # of the block, in the order the forward ran them

The probe, the in-training diagnostics, ``normlab inspect``, ``normlab analyze`` and the
non-finite replay all record through :func:`recording`, on a
:class:`~normlab.diagnostics.subject.Subject` (a lab ``TransformerLM`` is one too), so a
quantity is read the same way by every tool. The model's forward is never changed: hooks
observe it (``skip`` alone replaces a block's output by its input, for layer deletion).

Stream states are the tensors autograd uses (not detached): ``torch.autograd.grad(loss,
rec.stream)`` gives dLoss/dx_l. Norm and sub-module inputs are detached (values only). Hooks are removed
when the context exits, even on error; a forward run twice inside one context appends twice.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch import nn

from normlab.diagnostics.subject import Subject
from normlab.model.catalogue import norm_types


@dataclass
class Recording:
    """What one :func:`recording` context saw (see the module docstring)."""

    stream: list[torch.Tensor] = field(default_factory=list)
    aux: list[torch.Tensor | None] = field(default_factory=list)
    norm_in: dict[str, torch.Tensor] = field(default_factory=dict)
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    sites: list[tuple[str, Any]] = field(default_factory=list)

    def aux_stream(self) -> list[torch.Tensor] | None:
        """The second stream x_0..x_L beside the main one when every state carried one, else None."""
        if not self.aux or any(a is None for a in self.aux):
            return None
        return [a for a in self.aux if a is not None]


@contextlib.contextmanager
def recording(subject: Subject, *, stream: bool = True, skip: int | None = None, norms: bool = False,
              sites: bool = False, inputs: bool = False) -> Iterator[Recording]:
    """Record while the context is open: the residual ``stream`` (and its second stream), the
    inputs of the norm modules (``norms``: :func:`norm_names`), the state entering block 1
    (``embed``) and the outputs of each block's direct sub-modules and of the block (``sites``,
    named ``blocks.{l}.{child}`` and ``blocks.{l}``), the tensor input of each block's direct
    sub-modules (``inputs``, the same names: a lab block's sub-layers ``attn`` and ``ffn``);
    make block ``skip`` (0-based) pass its input on."""
    rec = Recording()
    handles: list[Any] = []

    def pre(i: int) -> Callable:
        def hook(m: nn.Module, args: tuple, kwargs: dict) -> None:
            h = args[0] if args else kwargs.get("hidden_states", next(iter(kwargs.values()), None))
            if stream and i == 0:
                rec.stream.append(subject.state_of(h))
                rec.aux.append(subject.aux_of(h))
            if sites and i == 0:
                rec.sites.append(("embed", h))
            if i == skip:
                m._normlab_in = h  # type: ignore[assignment]  # handed to the post hook
        return hook

    def post(i: int) -> Callable:
        def hook(m: nn.Module, _args: tuple, _kwargs: dict, out: Any) -> Any:
            if i == skip:
                out = subject.with_state(out, m.__dict__.pop("_normlab_in"))
            if stream:
                rec.stream.append(subject.state_of(out))
                rec.aux.append(subject.aux_of(out))
            if sites:
                rec.sites.append((f"blocks.{i}", out))
            return out
        return hook

    def site(name: str) -> Callable:
        def hook(_m: nn.Module, _args: tuple, out: Any) -> None:
            rec.sites.append((name, out))
        return hook

    def given(name: str) -> Callable:
        def hook(_m: nn.Module, args: tuple) -> None:
            if args and isinstance(args[0], torch.Tensor):
                rec.inputs[name] = args[0].detach()
        return hook

    try:
        for i, layer in enumerate(subject.layers):
            handles.append(layer.register_forward_pre_hook(pre(i), with_kwargs=True))
            handles.append(layer.register_forward_hook(post(i), with_kwargs=True))
            for child, mod in layer.named_children() if sites or inputs else ():
                if sites:
                    handles.append(mod.register_forward_hook(site(f"blocks.{i}.{child}")))
                if inputs:
                    handles.append(mod.register_forward_pre_hook(given(f"blocks.{i}.{child}")))
        if norms:
            handles += _norm_hooks(subject, rec.norm_in)
        yield rec
    finally:
        for h in handles:
            h.remove()


def is_norm(m: nn.Module) -> bool:
    """A normalisation module: one of the lab's registered norms or qk-norms (read now, so a
    norm registered later counts), or, in any other model, a leaf whose class name says norm."""
    return isinstance(m, norm_types()) or ("norm" in type(m).__name__.lower() and not any(True for _ in m.children()))


def norm_names(subject: Subject) -> dict[int, str]:
    """id(module) -> key of every norm the statistics read: ``blocks.{l}.{path}`` inside block
    l (``blocks.{l}.block.{name}`` for a norm directly on the block), and its own path for one outside the blocks (recorded only when it runs after the last
    block: the final norm). A norm inside another norm is its parent's business, not listed."""
    names: dict[int, str] = {}

    def walk(prefix: str, root: nn.Module, taken: list[str]) -> None:
        """Name the norms under ``root`` not inside a path of ``taken`` (pre-order: parents first)."""
        for path, m in root.named_modules():
            if not path or id(m) in names or not is_norm(m) or any(path.startswith(p + ".") for p in taken):
                continue
            taken.append(path)
            # inside a block, the first part of the path is its sub-layer ("block" for a norm on the block itself)
            names[id(m)] = f"{prefix}{path}" if not prefix or "." in path else f"{prefix}block.{path}"

    for i, layer in enumerate(subject.layers):
        walk(f"blocks.{i}.", layer, [])
    blocks = [p for p, m in subject.model.named_modules() if any(m is b for b in subject.layers)]
    walk("", subject.model, blocks)  # the norms outside the blocks (the final norm)
    return names


def _norm_hooks(subject: Subject, into: dict[str, torch.Tensor]) -> list[Any]:
    inside = {id(m) for layer in subject.layers for m in layer.modules()}
    done = [False]  # the last block has run: a norm outside the blocks now is a final one

    def keep(name: str, final: bool) -> Callable:
        def hook(_m: nn.Module, args: tuple) -> None:
            if args and isinstance(args[0], torch.Tensor) and (not final or done[0]):
                into[name] = args[0].detach()
        return hook

    handles = [subject.layers[-1].register_forward_hook(lambda *_: done.__setitem__(0, True)),
               subject.layers[0].register_forward_pre_hook(lambda *_: done.__setitem__(0, False))]
    by_id = {id(m): m for m in subject.model.modules()}
    for key, name in norm_names(subject).items():
        handles.append(by_id[key].register_forward_pre_hook(keep(name, final=key not in inside)))
    return handles

"""The operations' reports: classes declared as dataclasses are (fields annotated in the class
body, defaults, ``field(default_factory=...)``, ``field(init=False)``, ``__post_init__``), made
by ``@report`` on the base ``Report``. ``report`` gives a class the ``__init__``, repr and
equality a dataclass would have without compiling code for each class: the dataclasses module
compiles each class's methods when its module is imported, a cost every command's start-up
would pay for the reports it may never make."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Optional, Tuple, Type, \
    TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**kwargs: Any) -> Callable[[Any], Any]:
        return lambda f: f

_T = TypeVar("_T")
_MISSING: Any = object()


class _Field:
    __slots__ = ("default", "default_factory", "init")

    def __init__(self, default: Any, default_factory: Optional[Callable[[], Any]],
                 init: bool) -> None:
        self.default = default
        self.default_factory = default_factory
        self.init = init


def field(*, default: Any = _MISSING, default_factory: Optional[Callable[[], Any]] = None,
          init: bool = True) -> Any:
    """A field's default (``default``, or ``default_factory`` called for each new report) and
    whether ``__init__`` takes it (``init``), as ``dataclasses.field`` says them."""
    return _Field(default, default_factory, init)


# (name, default, default_factory, init) of each field, in declaration order
_Spec = Tuple[str, Any, Optional[Callable[[], Any]], bool]


def _specs(cls: type) -> List[_Spec]:
    found: Dict[str, _Spec] = {}
    for klass in reversed(cls.__mro__):
        for name, annotation in klass.__dict__.get("__annotations__", {}).items():
            if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
                continue
            value = klass.__dict__.get(name, _MISSING)
            if isinstance(value, _Field):
                spec: _Spec = (name, value.default, value.default_factory, value.init)
            else:
                spec = (name, value, None, True)
            found[name] = spec  # a field declared again keeps its place, as a dataclass's
    return list(found.values())


@dataclass_transform(eq_default=False, field_specifiers=(field,))
def report(cls: Type[_T]) -> Type[_T]:
    """Make ``cls`` a report: its ``__init__`` takes its fields in declaration order, by
    position or by name, each with its default when not given, then calls
    ``__post_init__`` when the class has one."""
    specs = _specs(cls)
    for name, default, _, _ in specs:
        if isinstance(cls.__dict__.get(name), _Field):
            if default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, default)
    init_names = tuple(name for name, _, _, init in specs if init)
    later = tuple(spec for spec in specs if not spec[3]
                  and (spec[1] is not _MISSING or spec[2] is not None))
    defaults = {name: (default, factory) for name, default, factory, _ in specs}
    post_init = getattr(cls, "__post_init__", None)
    qualname = cls.__qualname__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # one setattr per field, in declaration order: the instance keeps the compact
        # attribute storage (shared keys) that makes its attribute reads and writes fast,
        # which materialising its __dict__ would lose
        if len(args) > len(init_names):
            raise TypeError("%s() takes %d positional arguments but %d were given"
                            % (qualname, len(init_names), len(args)))
        for name, value in zip(init_names, args):
            setattr(self, name, value)
        for name in init_names[len(args):]:
            if name in kwargs:
                setattr(self, name, kwargs.pop(name))
                continue
            default, factory = defaults[name]
            if factory is not None:
                setattr(self, name, factory())
            elif default is not _MISSING:
                setattr(self, name, default)
            else:
                raise TypeError("%s() missing required argument: %r" % (qualname, name))
        if kwargs:
            name = next(iter(kwargs))
            raise TypeError("%s() got %s argument %r" % (
                qualname, "multiple values for" if name in init_names else "an unexpected keyword",
                name))
        for name, default, factory, _ in later:
            setattr(self, name, factory() if factory is not None else default)
        if post_init is not None:
            post_init(self)

    __init__.__qualname__ = qualname + ".__init__"
    setattr(cls, "__init__", __init__)
    setattr(cls, "__report_fields__", tuple(name for name, _, _, _ in specs))
    return cls


class Report:
    """The base of the reports: the repr and equality of a dataclass, over the fields."""

    __slots__ = ()
    __report_fields__: ClassVar[Tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__qualname__, ", ".join(
            "%s=%r" % (name, getattr(self, name, _MISSING))
            for name in self.__report_fields__))

    def __eq__(self, other: Any) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name, _MISSING) == getattr(other, name, _MISSING)
                   for name in self.__report_fields__)

    __hash__ = None  # type: ignore[assignment]  # as a dataclass's with eq: unhashable

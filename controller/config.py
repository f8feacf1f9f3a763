"""The one validated layer through which every TOML configuration of bemore is read.

It belongs to the bench side (which installs alone); the scientific side reaches it through
``controller.cli`` (``bemore.config`` re-exports it).

Each configuration file has a schema: a pydantic model with ``extra="forbid"`` (see
:class:`Section`). :func:`load_toml_model` reads the file and validates it; whatever is wrong —
a missing file, malformed TOML, an unknown key, a wrong type, a value out of range — becomes one
:class:`~controller.errors.ConfigError` line naming the file, the key and what is allowed::

    controller/configs/bench.toml: [limits] max_torque_nm = -5: must be greater than 0
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from controller.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

SchemaT = TypeVar("SchemaT", bound=BaseModel)


class Section(BaseModel):
    """Base of every configuration schema: unknown keys are refused, values are validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


CONFIG_WANTED = "a TOML configuration"  # what read_toml reads, unless its caller says more


def read_toml(path: str | Path, wanted: str = CONFIG_WANTED) -> dict[str, Any]:
    """Read a TOML file into a dict; a missing or malformed file raises ConfigError. Another
    command's output in its place (an athlete.json, a setpoints.csv…) is named as such, not as
    malformed TOML, with ``wanted`` (what the caller reads, e.g. "an athlete profile (…)")."""
    path = Path(path)
    if not path.is_file():
        from controller.filekinds import folder_refusal

        raise ConfigError(folder_refusal(path, wanted) or f"{path}: file not found")
    try:
        # past a byte order mark (a file re-saved by an editor that writes one)
        return tomllib.loads(path.read_bytes().decode("utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        from controller.filekinds import kind_of_file, refusal

        kind = kind_of_file(path)
        if kind is not None:
            raise ConfigError(refusal(path, kind, wanted)) from None
        reason = error if isinstance(error, tomllib.TOMLDecodeError) else "not UTF-8 text"
        raise ConfigError(f"{path}: malformed TOML: {reason}") from None


def load_toml_model(path: str | Path, schema: type[SchemaT],
                    wanted: str = CONFIG_WANTED) -> SchemaT:
    """Read ``path`` and validate it against ``schema``; any problem raises one ConfigError line
    (``wanted``: as :func:`read_toml`'s; by default the bundled kind whose tables the schema
    has, :func:`controller.filekinds.configuration_for`). A configuration of another kind (a
    bench.toml where an athlete profile is read, say) is named as such, not by its keys the
    schema refuses; a folder is named a folder."""
    from controller.filekinds import configuration_for, configuration_refusal

    expected = configuration_for(set(schema.model_fields))
    if wanted == CONFIG_WANTED and expected is not None:
        wanted = expected.wanted()  # "an identification configuration (a TOML file like …)"
    data = read_toml(path, wanted)
    try:
        return validate(data, schema, source=str(path))
    except ConfigError:  # perhaps a configuration of another kind (a bench.toml, say)
        line = configuration_refusal(path, data, expected, wanted)
        if line is not None:
            raise ConfigError(line) from None
        raise


def validate(data: dict[str, Any], schema: type[SchemaT], source: str) -> SchemaT:
    """Validate an already-parsed mapping; ``source`` names it in error messages."""
    try:
        return schema.model_validate(data)
    except ValidationError as error:
        # A misspelt key also shows up as a missing one: report the unknown key first.
        items = sorted(error.errors(), key=lambda item: item["type"] != "extra_forbidden")
        problems = [_describe(item, data, schema) for item in items]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise ConfigError(f"{source}: {problems[0]}{more}") from None


def _describe(item: dict[str, Any], data: dict[str, Any], schema: type[BaseModel]) -> str:
    """One readable phrase for one pydantic error: where, what was found, what is allowed."""
    location = [part for part in item["loc"] if part != "__root__"]
    where = _format_location(location)
    kind = item["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(schema, location[:-1])
        return f"{where}: unknown key (allowed: {', '.join(allowed)})"
    if kind == "missing":
        return f"{where}: missing required key"
    message = item["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    message = message[0].lower() + message[1:] if message else message
    message = message.replace("input should be", "must be")
    if location and "input" in item and not isinstance(item["input"], dict):
        return f"{where} = {item['input']!r}: {message}"
    return f"{where}: {message}"


def _format_location(location: list[Any]) -> str:
    """``["limits", "max_torque_nm"]`` → ``[limits] max_torque_nm``."""
    if not location:
        return "(top level)"
    keys = [str(part) for part in location]
    if len(keys) == 1:
        return keys[0]
    return f"[{'.'.join(keys[:-1])}] {keys[-1]}"


def _allowed_keys(schema: type[BaseModel], location: list[Any]) -> list[str]:
    """Field names of the (sub-)schema at ``location``, following nested models."""
    model: Any = schema
    for part in location:
        fields = getattr(model, "model_fields", None)
        if isinstance(part, int) and fields is not None:
            continue  # an index into a list of models: the model is already found
        if fields is None or part not in fields:
            # Inside a dict or list of models: look at the value type.
            args = getattr(model, "__args__", ())
            model = args[-1] if args else None
            continue
        model = fields[part].annotation
        args = getattr(model, "__args__", None)
        if args and not hasattr(model, "model_fields"):
            model = next((arg for arg in args if hasattr(arg, "model_fields")), args[-1])
    fields = getattr(model, "model_fields", None)
    return sorted(fields) if fields else []

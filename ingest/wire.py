"""A stored value in the contract's wire form, for every API that answers with values."""
import math


def wire_value(value: float):
    """Non-finite values travel as the strings "NaN", "Infinity" and "-Infinity" (contract v1)."""
    if math.isfinite(value):
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"

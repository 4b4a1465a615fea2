"""The rewriting: LEIR programs as egglog terms, the rule book of rules/*.egg, the analyses
inserted as facts, one-step enumeration with provenance, replay, bounded saturation and lint."""

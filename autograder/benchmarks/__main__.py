"""python -m autograder.benchmarks NAME [args...]: run one benchmark (a lab's, labNN, or `status`)."""
import importlib
import pkgutil
import sys

import autograder.benchmarks as package


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("lab") or m.name == "status")


def main(argv: list[str]) -> int:
    labs = available()
    if not argv or argv[0] not in labs:
        print(f"usage: python -m autograder.benchmarks NAME [args]; benchmarks: {', '.join(labs) or 'none'}",
              file=sys.stderr)
        return 2
    return importlib.import_module(f"autograder.benchmarks.{argv[0]}").main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

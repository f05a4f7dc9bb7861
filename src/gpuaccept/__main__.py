"""`python -m gpuaccept` runs the same CLI as the `gpuaccept` console script."""

from gpuaccept.cli import main

if __name__ == "__main__":
    main()

"""Which folders of the checkout become which packages of the wheel (the rest is pyproject.toml).

gateway/, adapters/ and contracts/ stay at the top of the repository and install as
loopgate.gateway, loopgate.adapters and loopgate.contracts; conformance/streams installs as
loopgate/recordings. The build reads the folders themselves, not loopgate/'s symlinks to them:
a checkout without symlinks (git's core.symlinks=false, Windows' default) holds those links as
small text files, and a build that followed them would pack an empty loopgate.

The package list is computed because pyproject.toml can only list packages by hand or find
them under their own names, and a subpackage missing from a hand-kept list would be missing
from the wheel without a word.
"""

from setuptools import find_packages, setup

FOLDERS = ("gateway", "adapters", "contracts")  # each installed as loopgate.<folder>
RECORDINGS = "conformance/streams"  # installed as loopgate/recordings (package data)

# Folders with an __init__.py; the data folders in them (console/static, schema) are package
# data of their packages (pyproject.toml's package-data).
subpackages = find_packages(
    include=[pattern for folder in FOLDERS for pattern in (folder, f"{folder}.*")]
)
setup(
    packages=["loopgate", "loopgate.recordings", *(f"loopgate.{p}" for p in subpackages)],
    package_dir={
        "loopgate.recordings": RECORDINGS,
        **{f"loopgate.{folder}": folder for folder in FOLDERS},
    },
)

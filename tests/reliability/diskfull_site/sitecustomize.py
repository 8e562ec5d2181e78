"""Run by every Python process of a :mod:`tests.reliability.diskfull` run as it starts
(this folder is first on its PYTHONPATH): the process the models build in
(:mod:`diligence.analytics.aside`) fills the disk at the phase too."""

import os

if "DISKFULL_PHASE" in os.environ:
    from pathlib import Path

    from tests.reliability.diskfull import install

    install(os.environ["DISKFULL_PHASE"], Path(os.environ["DISKFULL_FILLER"]))

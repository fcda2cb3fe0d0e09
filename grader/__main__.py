"""`python3 -m grader`: grade one track or one submission (grader/pipeline/grade.py)."""

import sys

from grader.pipeline.grade import main

sys.exit(main())

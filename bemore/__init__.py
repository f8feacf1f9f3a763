"""bemore — personalise and drive a robotic gymnastics training bench.

The coach's workflow is four steps, each a library call with a thin CLI over it:
identify (fit the gymnast model to a motion-capture trial), synthesize (optimal shoulder
gesture), drive (stream it to the bench), replay (review a session).
"""

__version__ = "0.1.0"

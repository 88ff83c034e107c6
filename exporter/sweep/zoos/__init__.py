"""The built-in zoos (:data:`exporter.sweep.ZOOS`): each module holds one ``ZOO``."""

"""The report's sections, one module each (:class:`~.base.Section`: id, title, style, html, text),
read from one :class:`~.base.RunView` per report; their order is :data:`dlbench.reports.outline.SECTIONS`.
"""

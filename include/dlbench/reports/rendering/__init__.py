"""How the report draws what the analysis computed: charts (SVG, PNG), the colour palette, the
comparison's data files and the HTML tables every section uses."""

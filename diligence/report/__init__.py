"""What analysts and readers get out of the warehouse, read through a step's session.

    data     the numbers of the HTML report (:func:`data.collect`)
    page     ``diligence report``: the self-contained HTML page (:func:`page.write_report`)
    export   ``diligence export``: one CSV or Parquet file per report

Each takes an open DuckDB session from :meth:`diligence.warehouse.Warehouse.session`;
none opens the warehouse itself. :mod:`diligence.steps` calls them in order.
"""

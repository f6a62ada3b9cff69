"""The static HTML pages the commands write: the run report (``report``), compare.html and its pages
(``compare``), the cost sections both show (``cost``) and the pieces every page is made of (``html``)."""

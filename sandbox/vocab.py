"""Fixed vocabularies the sandbox draws its fake but plausible data from.

Everything here is static: countries with cities and legal forms, name parts,
the company-type catalogue, questionnaire themes (forms with their questions),
document kinds and role names. The generator in :mod:`sandbox.generate`
picks from these lists with seeded randomness, so the same seed always yields
the same world.
"""

from __future__ import annotations

from typing import Final

# (country name, ISO 3166 alpha-2, cities, legal-form suffixes)
COUNTRIES: Final[tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]] = (
    ("Germany", "DE", ("Berlin", "Hamburg", "Munich", "Cologne", "Frankfurt", "Stuttgart"),
     ("GmbH", "AG", "KG")),
    ("France", "FR", ("Paris", "Lyon", "Marseille", "Toulouse", "Lille", "Nantes"),
     ("SAS", "SA", "SARL")),
    ("United Kingdom", "GB", ("London", "Manchester", "Birmingham", "Leeds", "Glasgow", "Bristol"),
     ("Ltd", "PLC", "LLP")),
    ("Netherlands", "NL", ("Amsterdam", "Rotterdam", "Utrecht", "Eindhoven", "The Hague"),
     ("B.V.", "N.V.")),
    ("Switzerland", "CH", ("Zurich", "Geneva", "Basel", "Lausanne", "Bern"),
     ("AG", "SA", "GmbH")),
    ("Italy", "IT", ("Milan", "Rome", "Turin", "Bologna", "Florence", "Naples"),
     ("S.p.A.", "S.r.l.")),
    ("Spain", "ES", ("Madrid", "Barcelona", "Valencia", "Seville", "Bilbao"),
     ("S.A.", "S.L.")),
    ("Sweden", "SE", ("Stockholm", "Gothenburg", "Malmo", "Uppsala"),
     ("AB",)),
    ("Poland", "PL", ("Warsaw", "Krakow", "Wroclaw", "Gdansk", "Poznan"),
     ("sp. z o.o.", "S.A.")),
    ("United States", "US", ("New York", "Chicago", "Austin", "Boston", "Seattle", "Denver"),
     ("Inc.", "LLC", "Corp.")),
    ("India", "IN", ("Mumbai", "Bengaluru", "Pune", "Chennai", "Hyderabad", "New Delhi"),
     ("Pvt Ltd", "Ltd")),
    ("Singapore", "SG", ("Singapore",), ("Pte. Ltd.",)),
    ("Japan", "JP", ("Tokyo", "Osaka", "Nagoya", "Yokohama"), ("K.K.", "G.K.")),
    ("Brazil", "BR", ("Sao Paulo", "Rio de Janeiro", "Curitiba", "Belo Horizonte"),
     ("Ltda.", "S.A.")),
)

# Indian state codes used in CINs, keyed by city.
INDIAN_STATE_BY_CITY: Final[dict[str, str]] = {
    "Mumbai": "MH", "Pune": "MH", "Bengaluru": "KA", "Chennai": "TN",
    "Hyderabad": "TG", "New Delhi": "DL",
}

NAME_ROOTS: Final[tuple[str, ...]] = (
    "Aster", "Bellwether", "Cobalt", "Delta", "Ember", "Fjord", "Granite", "Harbor",
    "Iris", "Juniper", "Keystone", "Lumen", "Meridian", "Northwind", "Orchid", "Pioneer",
    "Quarry", "Redwood", "Summit", "Tidal", "Umber", "Vertex", "Willow", "Xenon",
    "Yarrow", "Zephyr", "Alder", "Beacon", "Cedar", "Dune", "Evergreen", "Falcon",
    "Garnet", "Helix", "Ironbridge", "Jade", "Kestrel", "Larch", "Magnolia", "Nimbus",
    "Onyx", "Peregrine", "Quill", "Riverstone", "Sable", "Thistle", "Upland", "Vale",
)
NAME_TRADES: Final[tuple[str, ...]] = (
    "Logistics", "Components", "Pharma", "Analytics", "Textiles", "Foods", "Energy",
    "Metals", "Software", "Chemicals", "Packaging", "Freight", "Robotics", "Plastics",
    "Semiconductors", "Consulting", "Materials", "Medical", "Agritech", "Marine",
    "Electronics", "Paper", "Glassworks", "Motors", "Security", "Biotech",
)
NAME_JOINERS: Final[tuple[str, ...]] = (
    "", "", "", " & Partners", " Group", " Holding", " International",
)

FIRST_NAMES: Final[tuple[str, ...]] = (
    "Anna", "Ben", "Chiara", "David", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas",
    "Kavya", "Lukas", "Maya", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Sven", "Tara",
)
LAST_NAMES: Final[tuple[str, ...]] = (
    "Fischer", "Martin", "Rossi", "Garcia", "Jansen", "Nowak", "Smith", "Tanaka",
    "Sharma", "Silva", "Lindqvist", "Dubois", "Keller", "Moreau", "Costa", "Weber",
)

# The company-type catalogue: (id, label). Ids are opaque strings to clients.
COMPANY_TYPES: Final[tuple[tuple[str, str], ...]] = (
    ("ct-supplier", "Supplier"),
    ("ct-customer", "Customer"),
    ("ct-distributor", "Distributor"),
    ("ct-manufacturer", "Manufacturer"),
    ("ct-service-provider", "Service provider"),
    ("ct-logistics", "Logistics partner"),
    ("ct-financial", "Financial institution"),
    ("ct-reseller", "Reseller"),
    ("ct-public-authority", "Public authority"),
)
# Catalogue types no role or connection ever grants (their templates answer 403).
UNGRANTED_TYPES: Final[frozenset[str]] = frozenset({"ct-public-authority"})

INTERNAL_ROLE_NAMES: Final[tuple[str, ...]] = ("EDITOR", "SHARER", "SUPER_ADMIN")
EXTERNAL_ROLE_NAMES: Final[tuple[str, ...]] = ("SHARER", "APPROVER", "ADMIN")

# Input answer generators are named by a kind; see generate.input_value.
# A question is (field type, label, options-or-input-kind).
Question = tuple[str, str, "tuple[str, ...] | str"]

YES_NO: Final[tuple[str, ...]] = ("Yes", "No", "In progress")

THEMES: Final[tuple[tuple[str, tuple[Question, ...]], ...]] = (
    ("General information", (
        ("Input", "Registered legal name", "own_name"),
        ("Input", "Year of incorporation", "year"),
        ("Input", "Number of employees", "employees"),
        ("Dropdown", "Legal structure", ("Private limited", "Public limited", "Partnership",
                                          "Sole proprietorship", "Cooperative")),
        ("Checkbox", "Regions served", ("Europe", "North America", "South America", "Asia",
                                         "Africa", "Oceania")),
        ("Input", "Main contact e-mail", "email"),
    )),
    ("Ownership and management", (
        ("Input", "Chief executive officer", "person"),
        ("Input", "Ultimate beneficial owner", "person"),
        ("Dropdown", "Is the company publicly listed?", YES_NO),
        ("Checkbox", "Governance bodies in place", ("Board of directors", "Audit committee",
                                                     "Risk committee", "Remuneration committee")),
        ("Input", "Parent company", "company"),
    )),
    ("Compliance", (
        ("Dropdown", "Do you have an anti-bribery policy?", YES_NO),
        ("Dropdown", "Any sanctions exposure in the last five years?",
         ("None", "Minor", "Material")),
        ("Checkbox", "Compliance certifications held", ("ISO 37001", "ISO 19600", "SOC 1",
                                                         "None of these")),
        ("Input", "Compliance officer", "person"),
        ("Input", "Whistleblowing channel URL", "url"),
    )),
    ("Information security", (
        ("Dropdown", "Is ISO 27001 certification in place?", YES_NO),
        ("Checkbox", "Security controls", ("MFA", "Encryption at rest", "Encryption in transit",
                                            "SIEM", "Penetration testing", "EDR")),
        ("Input", "Date of last penetration test", "date"),
        ("Dropdown", "Data hosting location", ("EU", "US", "APAC", "Multi-region")),
        ("Input", "Security contact e-mail", "email"),
    )),
    ("Environmental, social and governance", (
        ("Dropdown", "Do you report Scope 3 emissions?", YES_NO),
        ("Checkbox", "Sustainability frameworks", ("GRI", "SASB", "TCFD", "CDP", "SBTi")),
        ("Input", "Share of renewable electricity (%)", "percent"),
        ("Dropdown", "EcoVadis rating", ("Platinum", "Gold", "Silver", "Bronze", "Not rated")),
        ("Input", "Sustainability report URL", "url"),
    )),
    ("Financials", (
        ("Input", "Annual revenue (EUR)", "money"),
        ("Dropdown", "Audited financial statements available?", YES_NO),
        ("Checkbox", "Banking partners", ("Deutsche Bank", "BNP Paribas", "HSBC", "ING",
                                           "Santander", "UBS")),
        ("Input", "Auditor", "company"),
        ("Dropdown", "Credit rating band", ("AAA-AA", "A", "BBB", "BB or below", "Unrated")),
    )),
    ("Data protection", (
        ("Dropdown", "Have you appointed a data protection officer?", YES_NO),
        ("Input", "Data protection officer", "person"),
        ("Checkbox", "Personal data categories processed", ("Employees", "Customers",
                                                             "Suppliers", "Health data",
                                                             "Payment data")),
        ("Dropdown", "Transfers outside the EEA", ("None", "With SCCs", "Adequacy decision")),
    )),
    ("Quality management", (
        ("Dropdown", "Is ISO 9001 certification in place?", YES_NO),
        ("Checkbox", "Quality tools used", ("Six Sigma", "Lean", "FMEA", "SPC", "8D")),
        ("Input", "Defect rate (ppm)", "int"),
        ("Input", "Quality manager", "person"),
    )),
    ("Supply chain", (
        ("Checkbox", "Sourcing countries", ("China", "India", "Vietnam", "Mexico", "Poland",
                                             "Turkey", "Germany")),
        ("Dropdown", "Supplier code of conduct signed?", YES_NO),
        ("Input", "Number of tier-1 suppliers", "int"),
        ("Checkbox", "Conflict minerals in products", ("Tin", "Tantalum", "Tungsten", "Gold",
                                                        "None")),
    )),
)

# Documents: (category, type, file-name stem, extension)
DOCUMENT_KINDS: Final[tuple[tuple[str, str, str, str], ...]] = (
    ("Legal", "Certificate of incorporation", "certificate_of_incorporation", "pdf"),
    ("Legal", "Articles of association", "articles_of_association", "pdf"),
    ("Compliance", "Anti-bribery policy", "anti_bribery_policy", "pdf"),
    ("Compliance", "Sanctions screening report", "sanctions_screening", "pdf"),
    ("Certification", "ISO 9001 certificate", "iso_9001_certificate", "pdf"),
    ("Certification", "ISO 27001 certificate", "iso_27001_certificate", "pdf"),
    ("Certification", "ISO 14001 certificate", "iso_14001_certificate", "pdf"),
    ("Financial", "Audited financial statements", "financial_statements", "pdf"),
    ("Financial", "Bank reference letter", "bank_reference", "pdf"),
    ("Insurance", "Liability insurance certificate", "liability_insurance", "pdf"),
    ("ESG", "Sustainability report", "sustainability_report", "pdf"),
    ("Tax", "Tax residency certificate", "tax_residency", "pdf"),
    ("Data protection", "Data processing agreement", "data_processing_agreement", "docx"),
)
